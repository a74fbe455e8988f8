package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/renameio/v2"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
	"github.com/stepseq/stepseq/watcher"
)

// ErrReportRefused is matched by submitReport's error for a refused report: a
// *RefusedError with every reason.
var ErrReportRefused = errors.New("report refused")

// RefusedError is a refused report's every reason. Problems: the report
// itself lacks a field or is malformed.
type RefusedError struct {
	Reasons  []string
	Problems bool
}

func (e *RefusedError) Error() string {
	return ErrReportRefused.Error() + ":\n  " + strings.Join(e.Reasons, "\n  ")
}

func (e *RefusedError) Unwrap() error { return ErrReportRefused }

// ErrNoVerdict is returned by submitReport when the report is queued but no
// verdict came in time.
var ErrNoVerdict = errors.New("report queued; no verdict yet")

// verdictNudge is how often a report waiting for its verdict is touched again: its
// file event is what the running stepseq acts on, and a second one costs nothing.
const verdictNudge = 250 * time.Millisecond

// submitReport is the report channel of `stepseq report` and of MCP beside a live
// sidecar: it refuses at once what the report alone or the state shows is wrong (a
// missing field, a bad risk, a stale try, a move the phase does not allow), drops
// the report in the step's folder atomically, and waits up to wait for the verdict
// of the stepseq running the step. try 0 means the current one.
func submitReport(ctx context.Context, ws store.Workspace, step string, try int, rep planspec.WorkerReport, wait time.Duration) error {
	st, err := (&store.StateFile{Path: ws.State}).Read()
	if err != nil {
		return err
	}
	running := core.RunningTry(st, step)
	if reasons := core.AdmitReport(st, step, try, running, rep); len(reasons) > 0 {
		return &RefusedError{Reasons: reasons}
	}
	if try == 0 {
		try = running
	}
	data, err := json.Marshal(rep) // JSON keeps every field as it was given
	if err != nil {
		return err
	}
	dir := ws.ReportsDir(step)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report folder: %w", err)
	}
	path := filepath.Join(dir, strconv.Itoa(try)+"-"+strconv.FormatInt(time.Now().UnixNano(), 10)+".json")
	waitCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var verdict error
	judged := false
	cfg := watcher.Config{Root: ws.Dir, Paths: []string{ws.ReportsRel(step)}, Settle: time.Millisecond}
	err = watcher.Follow(waitCtx, cfg, func(b *watcher.Batch) (time.Duration, bool, error) {
		switch {
		case data != nil:
			// The first call: the folder is watched, so the verdict cannot go unseen.
			if err := dropReport(ws, st, step, path, data); err != nil {
				return 0, true, err
			}
			data = nil
		case b == nil:
			// Its file event is what the running stepseq acts on: another costs nothing.
			now := time.Now()
			_ = os.Chtimes(path, now, now)
		}
		verdict, judged = reportVerdict(path)
		return verdictNudge, judged, nil
	})
	switch {
	case err != nil:
		if errors.Is(err, watcher.ErrStopped) {
			return fmt.Errorf("%w: %s", ErrNoVerdict, path)
		}
		return err
	case judged:
		return verdict
	case ctx.Err() != nil:
		_ = os.Remove(path)
		return ctx.Err()
	}
	return fmt.Errorf("%w after %s: %s", ErrNoVerdict, wait, path)
}

// dropReport writes the report where the stepseq that runs step reads it, and
// refuses it when no stepseq runs the step, or says no verdict will come before
// the agent exits.
func dropReport(ws store.Workspace, st *planspec.State, step, path string, data []byte) error {
	if err := renameio.WriteFile(path, data, 0o644, renameio.WithTempDir(filepath.Dir(path))); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	holder, held, err := store.LockHeld(ws)
	if err != nil {
		_ = os.Remove(path)
		return err
	}
	if !held {
		_ = os.Remove(path)
		return &RefusedError{Reasons: []string{fmt.Sprintf("stale: no stepseq is running step %s now", step)}}
	}
	if holder != nil && holder.Kind != "watch" && !st.UsesReports(step) {
		// check or step runs a plan that takes no reports: it reads this one when
		// the agent exits, and the agent must not wait for that.
		return fmt.Errorf("%w: stepseq %s reads it when this agent exits", ErrNoVerdict, holder.Kind)
	}
	return nil
}

// reportVerdict reads the verdict on the report at path: refused, with the
// reasons in path.why beside path.rejected, or accepted once the report is
// taken; judged is false while neither is so.
func reportVerdict(path string) (verdict error, judged bool) {
	if why, err := os.ReadFile(path + ".why"); err == nil {
		if _, err := os.Stat(path + ".rejected"); err == nil {
			// The caller has the reasons: the files would only pile up.
			_ = os.Remove(path + ".why")
			_ = os.Remove(path + ".rejected")
			return &RefusedError{Reasons: strings.Split(strings.TrimSpace(string(why)), "\n")}, true
		}
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(path + ".rejected"); errors.Is(err, os.ErrNotExist) {
			return nil, true // taken: accepted
		}
	}
	return nil, false
}
