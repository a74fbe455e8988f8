package store

import (
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

// Retention (the seed's TTL prune): archived runs, try logs and rotated
// journals older than their retention are removed, at start and once a day. What
// Ended well is kept for Finished; what ended blocked or failed, which someone may
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
// current state; a running step's logs are never touched) and rotated journals,
// and, for the workspace's own run, the runs beside it (pruneRuns). A zero
// retention keeps that kind. Errors are collected; pruning goes on.
func Prune(ws Workspace, now time.Time, p RetentionPolicy) (Pruned, error) {
	pr := &pruner{ws: ws, now: now, p: p}
	if ws.Run == "" { // the history is the folder's, pruned once with its own run
		pr.history()
	}
	pr.logs()
	pr.journals()
	if ws.Run == "" {
		pruned, err := pruneRuns(ws, now, p, pr.expired)
		pr.out.Removed = append(pr.out.Removed, pruned...)
		pr.errs = append(pr.errs, err)
	}
	return pr.out, errors.Join(pr.errs...)
}

// pruner is one Prune: what it removed and what failed.
type pruner struct {
	ws   Workspace
	now  time.Time
	p    RetentionPolicy
	out  Pruned
	errs []error
}

func (pr *pruner) expired(fi fs.FileInfo, keep time.Duration) bool {
	return keep > 0 && pr.now.Sub(fi.ModTime()) > keep
}

// shortest is the shorter retention that removes anything (0: none does). A
// file younger than it is kept whatever its status, which need not be read.
func (p RetentionPolicy) shortest() time.Duration {
	if p.Finished > 0 && (p.Failed <= 0 || p.Finished < p.Failed) {
		return p.Finished
	}
	return p.Failed
}

func (pr *pruner) remove(path string) {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		pr.errs = append(pr.errs, err)
		return
	}
	rel, _ := filepath.Rel(pr.ws.Dir, path)
	pr.out.Removed = append(pr.out.Removed, filepath.ToSlash(rel))
}

// history prunes archived runs: a DONE state is finished; anything else ended
// blocked or failed.
func (pr *pruner) history() {
	entries, err := os.ReadDir(pr.ws.HistoryDir())
	if err != nil {
		return
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		if !pr.expired(fi, pr.p.shortest()) {
			continue
		}
		path := filepath.Join(pr.ws.HistoryDir(), e.Name())
		keep := pr.p.Failed
		if archivedDone(path) {
			keep = pr.p.Finished
		}
		if pr.expired(fi, keep) {
			pr.remove(path)
		}
	}
}

// logs prunes try logs by their step's status in the current state; a folder
// left empty goes too. The state's statuses are read only when there are logs
// old enough to judge: a thousand runs without logs cost a thousand directory
// reads, not state reads, and a sidecar that starts beside a large state does
// not read it a second time.
func (pr *pruner) logs() {
	logs := pr.ws.RunMeta("logs")
	dirs, err := os.ReadDir(logs)
	if err != nil || len(dirs) == 0 || !pr.anyExpired(logs, dirs) {
		return
	}
	st, _ := ReadStatuses(pr.ws.State)
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		keep, running := pr.logKeep(st.Runs, d.Name())
		if running {
			continue
		}
		dir := filepath.Join(logs, d.Name())
		files, _ := os.ReadDir(dir)
		left := len(files)
		for _, f := range files {
			fi, err := f.Info()
			if err == nil && fi.Mode().IsRegular() && pr.expired(fi, keep) {
				pr.remove(filepath.Join(dir, f.Name()))
				left--
			}
		}
		if left == 0 {
			_ = os.Remove(dir)
		}
	}
}

// anyExpired reports whether a file in one of the folders dirs of logs is
// older than the shorter retention.
func (pr *pruner) anyExpired(logs string, dirs []fs.DirEntry) bool {
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		files, _ := os.ReadDir(filepath.Join(logs, d.Name()))
		for _, f := range files {
			if fi, err := f.Info(); err == nil && fi.Mode().IsRegular() && pr.expired(fi, pr.p.shortest()) {
				return true
			}
		}
	}
	return false
}

// logKeep is how long the logs in folder name are kept: a DONE step's as
// finished, any other's as failed; running is true while its step runs. runs
// are the steps' run statuses, nil when the state could not be read.
func (pr *pruner) logKeep(runs map[string]string, name string) (keep time.Duration, running bool) {
	keep = pr.p.Failed
	for id, status := range runs {
		if safeName(id) != name {
			continue
		}
		switch status {
		case planspec.StatusDone:
			keep = pr.p.Finished
		case planspec.StatusInProgress:
			running = true
		}
	}
	return keep, running
}

// journals prunes rotated journals: journal.jsonl.1 and older.
func (pr *pruner) journals() {
	dir := filepath.Dir(pr.ws.JournalPath())
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	base := filepath.Base(pr.ws.JournalPath()) + "."
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), base) {
			continue
		}
		if _, err := strconv.Atoi(strings.TrimPrefix(e.Name(), base)); err != nil {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && pr.expired(fi, pr.p.Failed) {
			pr.remove(filepath.Join(dir, e.Name()))
		}
	}
}

// pruneRuns prunes the runs beside the workspace's own: a closed
// run and a finished one (its state DONE) go whole, state file and folder, once
// their retention has passed since they were closed or last written; a run
// still open keeps its state, and its logs and rotated journals are pruned as
// the workspace's own are.
func pruneRuns(ws Workspace, now time.Time, p RetentionPolicy, expired func(fs.FileInfo, time.Duration) bool) ([]string, error) {
	var removed []string
	var errs []error
	gone := func(paths ...string) {
		for _, path := range paths {
			if err := os.RemoveAll(path); err != nil {
				errs = append(errs, err)
				return
			}
		}
		rel, _ := filepath.Rel(ws.Dir, paths[len(paths)-1])
		removed = append(removed, filepath.ToSlash(rel))
	}
	names := map[string]bool{}
	if live, err := RunNames(ws); err == nil {
		for _, n := range live {
			if n != MainRun {
				names[n] = true
			}
		}
	}
	if entries, err := os.ReadDir(ws.RunsDir()); err == nil {
		for _, e := range entries {
			if e.IsDir() && ValidRunName(e.Name()) == nil && e.Name() != MainRun {
				names[e.Name()] = true
			}
		}
	}
	for name := range names {
		rw := ws.ForRun(name)
		if fi, err := os.Stat(rw.State); err == nil {
			// The age first: a run written within its retention is not read.
			if expired(fi, p.Finished) && archivedDone(rw.State) {
				gone(rw.State, rw.RunDir())
				continue
			}
			sub, err := Prune(rw, now, p)
			removed = append(removed, sub.Removed...)
			errs = append(errs, err)
			continue
		}
		fi, err := os.Stat(rw.ClosedPath())
		if err != nil || !expired(fi, p.shortest()) {
			continue // a folder without a run (a start under way, or its logs alone), or kept whatever its end
		}
		keep := p.Failed
		if archivedDone(rw.ClosedPath()) {
			keep = p.Finished
		}
		if expired(fi, keep) {
			gone(rw.RunDir())
		}
	}
	return removed, errors.Join(errs...)
}

// archivedDone reports whether an archived state's plan was DONE. It reads the
// statuses only, as they stream by, and refuses what ReadFile refuses (a FIFO, a
// file over the state cap) unread: an archive that does not read is kept the
// longer time.
func archivedDone(path string) bool {
	st, err := ReadStatuses(path)
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
