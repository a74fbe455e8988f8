package notify

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/stepseq/stepseq/executor"
)

// FeedName is the file under .stepseq/ that holds every report, one JSON object a
// line, for status, the page and MCP to show.
const FeedName = "notifications.jsonl"

// DefaultFeedBytes is the size at which the feed rotates to notifications.jsonl.1,
// as the journal does.
const DefaultFeedBytes = executor.DefaultJournalMax

// feed is the always-present sink: an append-only file bounded like the journal.
type feed struct {
	path string
	max  int64

	mu   sync.Mutex
	f    *os.File
	size int64
}

func (d *feed) deliver(_ context.Context, _ Report, body []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	line := make([]byte, 0, len(body)+1)
	line = append(append(line, body...), '\n')
	if err := d.open(); err != nil {
		return err
	}
	if d.size > 0 && d.size+int64(len(line)) > d.max {
		d.f.Close()
		d.f = nil
		if err := os.Rename(d.path, d.path+".1"); err != nil {
			return err
		}
		if err := d.open(); err != nil {
			return err
		}
	}
	n, err := d.f.Write(line)
	d.size += int64(n)
	return err
}

func (d *feed) open() error {
	if d.f != nil {
		return nil
	}
	f, err := openFile(d.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	d.f, d.size = f, info.Size()
	return nil
}

func (d *feed) close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f == nil {
		return nil
	}
	err := d.f.Close()
	d.f = nil
	return err
}

// Recent returns the last n reports of the feed in dir (the workspace or its
// .stepseq folder), oldest first, each ID once. It reads only the end of the feed
// (and of its rotated predecessor when the feed holds fewer than n), so it costs
// the same whatever the feed's size. A missing feed is no reports.
func Recent(dir string, n int) ([]Report, error) {
	if n <= 0 {
		return nil, nil
	}
	path := filepath.Join(metaDir(dir), FeedName)
	// A repeat (a crash between a delivery and its cursor) is rare: read a few
	// lines more than asked so that dropping repeats still leaves n.
	want := n + 8
	var out []Report
	for _, p := range []string{path, path + ".1"} {
		got, err := tail(p, want-len(out))
		if err != nil {
			return nil, err
		}
		out = append(got, out...)
		if len(out) >= want {
			break
		}
	}
	// A report delivered twice (a crash between delivery and cursor) shows once.
	seen := make(map[string]bool, len(out))
	kept := make([]Report, 0, len(out))
	for i := len(out) - 1; i >= 0; i-- {
		if r := out[i]; !seen[r.ID] {
			seen[r.ID] = true
			kept = append(kept, r)
		}
	}
	slices.Reverse(kept)
	if len(kept) > n {
		kept = kept[len(kept)-n:]
	}
	return kept, nil
}

// Since returns the reports of the feed in dir that came after the report with
// ID after (all of the last max when after is empty or no longer in view), oldest
// first. IDs of one workspace sort in emit order, which is what makes this work;
// status --follow calls it each time the feed changes.
func Since(dir, after string, max int) ([]Report, error) {
	recent, err := Recent(dir, max)
	if err != nil {
		return nil, err
	}
	i := 0
	for i < len(recent) && recent[i].ID <= after {
		i++
	}
	return recent[i:], nil
}

// tail reads the last n well-formed reports of one file, reading backwards a block
// at a time.
func tail(path string, n int) ([]Report, error) {
	if n <= 0 {
		return nil, nil
	}
	f, err := openFile(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", FeedName, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	const block = 64 << 10
	end := info.Size()
	start := end
	var buf []byte
	for start > 0 && bytes.Count(buf, []byte{'\n'}) <= n {
		step := min(int64(block), start)
		start -= step
		chunk := make([]byte, step)
		if _, err := f.ReadAt(chunk, start); err != nil && err != io.EOF {
			return nil, err
		}
		buf = append(chunk, buf...)
	}
	if start > 0 {
		// The first line may be partial: skip it.
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			buf = buf[i+1:]
		}
	}
	var out []Report
	sc := bufio.NewScanner(bytes.NewReader(buf))
	sc.Buffer(make([]byte, 0, 64<<10), len(buf)+1)
	for sc.Scan() {
		var r Report
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.ID != "" {
			out = append(out, r)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out, nil
}

// metaDir is the .stepseq folder of dir, which names either it or its workspace.
func metaDir(dir string) string {
	if filepath.Base(dir) == executor.MetaDir {
		return dir
	}
	return filepath.Join(dir, executor.MetaDir)
}
