package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/stepseq/stepseq/planspec"
)

// Retention (the seed's TTL prune, DESIGN §9): archived runs, try logs and rotated
// journals older than their retention are removed, at start and once a day. What
// ended well is kept for Finished; what ended blocked or failed, which someone may
// still need to look into, for Failed.

// RetentionPolicy is how long what a run leaves is kept.
type RetentionPolicy struct {
	Finished time.Duration // archived DONE runs and the logs of DONE steps
	Failed   time.Duration // blocked or failed runs, their logs, rotated journals
}

// DefaultRetention keeps finished runs 30 days, blocked or failed ones 90.
var DefaultRetention = RetentionPolicy{Finished: 30 * 24 * time.Hour, Failed: 90 * 24 * time.Hour}

// ParseRetention reads --retain: "finished=30d,failed=90d", either part optional,
// days (d) or any Go duration; "0" for a part keeps that kind forever.
func ParseRetention(s string) (RetentionPolicy, error) {
	p := DefaultRetention
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		key, val, ok := strings.Cut(part, "=")
		if !ok {
			return p, fmt.Errorf("--retain %q: want finished=30d,failed=90d", s)
		}
		d, err := parseDays(val)
		if err != nil {
			return p, fmt.Errorf("--retain %s: %v", part, err)
		}
		switch key {
		case "finished":
			p.Finished = d
		case "failed", "blocked":
			p.Failed = d
		default:
			return p, fmt.Errorf("--retain %s: unknown kind %q: want finished or failed", part, key)
		}
	}
	return p, nil
}

// maxRetainDays is the most days a time.Duration holds: more overflow it into a
// negative span, which would prune everything at once.
const maxRetainDays = int(math.MaxInt64 / int64(24*time.Hour))

func parseDays(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days < 0 {
			return 0, fmt.Errorf("bad duration %q: want days like 30d, or 720h", s)
		}
		if days > maxRetainDays {
			return 0, fmt.Errorf("bad duration %q: longer than %dd, the longest retention stepseq takes (0 keeps forever)", s, maxRetainDays)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	if s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("bad duration %q: want days like 30d, or 720h", s)
	}
	return d, nil
}

// Pruned is what one Prune removed, as workspace-relative paths.
type Pruned struct {
	Removed []string
}

// Prune removes what is older than its retention as of now: archived states under
// .stepseq/history, try logs under .stepseq/logs (by their step's status in the
// current state; a running step's logs are never touched) and rotated journals.
// A zero retention keeps that kind. Errors are collected; pruning goes on.
func Prune(ws Workspace, now time.Time, p RetentionPolicy) (Pruned, error) {
	var out Pruned
	var errs []error
	expired := func(fi fs.FileInfo, keep time.Duration) bool {
		return keep > 0 && now.Sub(fi.ModTime()) > keep
	}
	remove := func(path string) {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			return
		}
		rel, _ := filepath.Rel(ws.Dir, path)
		out.Removed = append(out.Removed, filepath.ToSlash(rel))
	}

	// Archived runs: a DONE state is finished; anything else ended blocked or failed.
	if entries, err := os.ReadDir(ws.HistoryDir()); err == nil {
		for _, e := range entries {
			fi, err := e.Info()
			if err != nil || !fi.Mode().IsRegular() || !strings.HasSuffix(e.Name(), ".json") {
				continue
			}
			path := filepath.Join(ws.HistoryDir(), e.Name())
			keep := p.Failed
			if archivedDone(path) {
				keep = p.Finished
			}
			if expired(fi, keep) {
				remove(path)
			}
		}
	}

	// Try logs, by their step's status now.
	st, _ := (&StateFile{Path: ws.State}).Read()
	logs := filepath.Join(ws.Dir, MetaDir, "logs")
	if dirs, err := os.ReadDir(logs); err == nil {
		for _, d := range dirs {
			if !d.IsDir() {
				continue
			}
			keep, running := p.Failed, false
			if st != nil {
				for id, run := range st.StepRuns {
					if safeName(id) != d.Name() || run == nil {
						continue
					}
					switch run.Status {
					case planspec.StatusDone:
						keep = p.Finished
					case planspec.StatusInProgress:
						running = true
					}
				}
			}
			if running {
				continue
			}
			dir := filepath.Join(logs, d.Name())
			files, _ := os.ReadDir(dir)
			left := len(files)
			for _, f := range files {
				fi, err := f.Info()
				if err == nil && fi.Mode().IsRegular() && expired(fi, keep) {
					remove(filepath.Join(dir, f.Name()))
					left--
				}
			}
			if left == 0 {
				_ = os.Remove(dir)
			}
		}
	}

	// Rotated journals: journal.jsonl.1 and older.
	if entries, err := os.ReadDir(filepath.Dir(ws.JournalPath())); err == nil {
		base := filepath.Base(ws.JournalPath()) + "."
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), base) {
				continue
			}
			if _, err := strconv.Atoi(strings.TrimPrefix(e.Name(), base)); err != nil {
				continue
			}
			if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && expired(fi, p.Failed) {
				remove(filepath.Join(filepath.Dir(ws.JournalPath()), e.Name()))
			}
		}
	}
	return out, errors.Join(errs...)
}

// archivedDone reports whether an archived state's plan was DONE. It reads the
// status member only: an archive that does not parse is kept the longer time.
func archivedDone(path string) bool {
	data, err := os.ReadFile(path)
	if err != nil || len(data) > planspec.MaxStateSize {
		return false
	}
	st, err := planspec.ParseState(bytes.NewReader(data), filepath.Base(path))
	return err == nil && st.Status == planspec.StatusDone
}

// RunRetention prunes at once and then once a day until ctx ends, logging what it
// removed. Commands that hold a workspace for long (watch, mcp) run it beside
// their loop.
func RunRetention(ctx context.Context, ws Workspace, p RetentionPolicy, now func() time.Time, log *slog.Logger) {
	prune := func() {
		got, err := Prune(ws, now(), p)
		if len(got.Removed) > 0 {
			log.Info("retention: pruned old runs, logs and journals", "removed", len(got.Removed))
		}
		if err != nil {
			log.Warn("retention", "err", err)
		}
	}
	prune()
	t := time.NewTicker(24 * time.Hour)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			prune()
		}
	}
}
