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
	"iter"
	"os"
	"path/filepath"
	"slices"

	"github.com/stepseq/stepseq/executor/store"
)

// FeedName is the file under .stepseq/ that holds every report, one JSON object a
// line, for status, the page and MCP to show.
const FeedName = "notifications.jsonl"

// DefaultFeedBytes is the size at which the feed rotates to notifications.jsonl.1,
// as the journal does.
const DefaultFeedBytes = store.DefaultJournalMax

// feed is the always-present sink: an append-only file bounded like the journal,
// each report in it whole or absent.
type feed struct {
	lines store.LineLog
}

func newFeed(path string, max int64) *feed {
	return &feed{lines: store.LineLog{Path: path, Max: max}}
}

func (d *feed) deliver(_ context.Context, _ Notice, body []byte) error {
	line := make([]byte, 0, len(body)+1)
	return d.lines.Append(append(append(line, body...), '\n'))
}

func (d *feed) close() error { return d.lines.Close() }

// Recent returns the last n reports of the feed in dir (the workspace or its
// .stepseq folder), oldest first, each ID once. It reads only the end of the feed
// (and of its rotated predecessor when the feed holds fewer than n), so it costs
// the same whatever the feed's size. A missing feed is no reports.
func Recent(dir string, n int) ([]Notice, error) {
	if n <= 0 {
		return nil, nil
	}
	path := filepath.Join(metaDir(dir), FeedName)
	// A repeat (a crash between a delivery and its cursor) is rare: read a few
	// lines more than asked so that dropping repeats still leaves n.
	want := n + 8
	var out []Notice
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
	kept := make([]Notice, 0, len(out))
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
func Since(dir, after string, max int) ([]Notice, error) {
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
func tail(path string, n int) ([]Notice, error) {
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
	var out []Notice
	sc := bufio.NewScanner(bytes.NewReader(buf))
	sc.Buffer(make([]byte, 0, 64<<10), len(buf)+1)
	for sc.Scan() {
		if r, ok := feedLine(sc.Bytes()); ok {
			out = append(out, r)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out, nil
}

// feedLine reads one line of the feed.
func feedLine(b []byte) (Notice, bool) {
	var r Notice
	whole, ok := FeedRecord(b)
	if !ok || json.Unmarshal(whole, &r) != nil || r.ID == "" {
		return Notice{}, false
	}
	return r, true
}

// FeedRecord is the report a line of the feed holds, as JSON. A line that does
// not parse may be a partial report with a whole one run on after it (a feed
// written before appends were cut back on failure): the whole one is read from
// where it starts.
func FeedRecord(line []byte) ([]byte, bool) {
	if json.Valid(line) {
		return line, bytes.HasPrefix(bytes.TrimSpace(line), []byte("{"))
	}
	for i := 1; i < len(line); i++ {
		j := bytes.Index(line[i:], []byte(`{"id":`))
		if j < 0 {
			break
		}
		i += j
		if json.Valid(line[i:]) {
			return line[i:], true
		}
	}
	return nil, false
}

// FeedLines are the whole lines of a feed's content: a last line without its
// newline is a report still being written (or cut short) and is left out.
func FeedLines(data []byte) iter.Seq[[]byte] {
	if i := bytes.LastIndexByte(data, '\n'); i < len(data)-1 {
		data = data[:i+1]
	}
	return func(yield func([]byte) bool) {
		for line := range bytes.SplitSeq(data, []byte("\n")) {
			if len(bytes.TrimSpace(line)) > 0 && !yield(line) {
				return
			}
		}
	}
}

// metaDir is the .stepseq folder of dir, which names either it or its workspace.
func metaDir(dir string) string {
	if filepath.Base(dir) == store.MetaDir {
		return dir
	}
	return filepath.Join(dir, store.MetaDir)
}
