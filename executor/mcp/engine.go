package mcp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
	"github.com/stepseq/stepseq/watcher"
)

// Engine is what the tools ask of the workspace's plan: the in-process sidecar's
// loop, or the workspace files when another stepseq holds the workspace.
type Engine interface {
	// View runs fn with the state (nil when there is none); fn must neither
	// change it nor keep it.
	View(ctx context.Context, fn func(st *planspec.State)) error
	// Current hands the pulled try on offer to client, or says why there is none.
	// A try another client claimed stays its own while live says that client's
	// session lives.
	Current(ctx context.Context, client string, live func(client string) bool) (o engine.Offer, ok bool, why string, err error)
	// Verify returns the step and try a token names.
	Verify(token string) (string, int, error)
	// Report judges a worker's report for a try.
	Report(ctx context.Context, step string, try int, rep planspec.Report) (accepted bool, reasons []string, err error)
	Retry(ctx context.Context, step string) error
	Trigger(ctx context.Context, step string) error
	// Budget changes the run's budget, or step's (engine.Budget's checks).
	Budget(ctx context.Context, step string, changes []string) error
}

// SidecarEngine acts through a sidecar this process runs.
func SidecarEngine(sc *engine.Sidecar) Engine { return sidecarEngine{sc} }

type sidecarEngine struct{ sc *engine.Sidecar }

func (e sidecarEngine) View(ctx context.Context, fn func(*planspec.State)) error {
	return e.sc.View(ctx, fn)
}

func (e sidecarEngine) Current(ctx context.Context, client string, live func(string) bool) (engine.Offer, bool, string, error) {
	return e.sc.Current(ctx, client, live)
}

func (e sidecarEngine) Verify(token string) (string, int, error) { return e.sc.VerifyToken(token) }

func (e sidecarEngine) Report(ctx context.Context, step string, try int, rep planspec.Report) (bool, []string, error) {
	return e.sc.Report(ctx, step, try, rep, "mcp")
}

func (e sidecarEngine) Retry(ctx context.Context, step string) error { return e.sc.Retry(ctx, step) }
func (e sidecarEngine) Trigger(ctx context.Context, step string) error {
	return e.sc.Trigger(ctx, step)
}

func (e sidecarEngine) Budget(ctx context.Context, step string, changes []string) error {
	_, err := e.sc.Budget(ctx, step, changes)
	return err
}

// FilesEngine acts through the workspace as any agent does: it reads state.json,
// drops reports in the step's report folder and waits for the verdict file, and
// queues triggers. The sidecar that holds the workspace does the rest. Its tokens
// are signed with the workspace's key, as the sidecar's are.
func FilesEngine(ws store.Workspace) (Engine, error) {
	key, err := engine.PullKey(ws)
	if err != nil {
		return nil, err
	}
	return newFilesEngine(ws, key), nil
}

// newFilesEngine acts through ws's files, its tokens signed with key.
func newFilesEngine(ws store.Workspace, key []byte) *filesEngine {
	return &filesEngine{ws: ws, sf: &store.StateFile{Path: ws.State}, pull: engine.NewPullLauncher(key), taken: core.Claims{}}
}

type filesEngine struct {
	ws   store.Workspace
	sf   *store.StateFile
	pull *engine.PullLauncher // signs and checks tokens only

	mu      sync.Mutex
	taken   core.Claims
	viewing sync.Mutex
}

// View reads the state file and runs fn, one call at a time: fn may use the
// server's Runtime, which is not safe for concurrent use.
func (e *filesEngine) View(_ context.Context, fn func(*planspec.State)) error {
	st, err := e.snapshot()
	if err != nil {
		return err
	}
	e.viewing.Lock()
	defer e.viewing.Unlock()
	fn(st)
	return nil
}

func (e *filesEngine) snapshot() (*planspec.State, error) {
	st, err := e.sf.Read()
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return st, err
}

// Current offers the pulled try the state has on offer (core.OfferedTry): the
// step at the cursor, once the sidecar has dispatched it.
func (e *filesEngine) Current(_ context.Context, client string, live func(string) bool) (engine.Offer, bool, string, error) {
	st, err := e.snapshot()
	if err != nil {
		return engine.Offer{}, false, "", err
	}
	t, ok, why := core.OfferedTry(st)
	if !ok {
		return engine.Offer{}, false, why, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if ok, why := e.taken.Take(t.Step, t.Try, client, live); !ok {
		return engine.Offer{}, false, why, nil
	}
	return engine.Offer{PulledTry: t, Token: e.pull.Token(t.Step, t.Try)}, true, "", nil
}

func (e *filesEngine) Verify(token string) (string, int, error) { return e.pull.Verify(token) }

// verdictWait bounds the wait for the sidecar's verdict on a dropped report.
const verdictWait = 30 * time.Second

// Report drops the report in the step's folder and waits for the sidecar's
// verdict, as `stepseq report` does.
func (e *filesEngine) Report(ctx context.Context, step string, try int, rep planspec.Report) (bool, []string, error) {
	err := engine.SubmitReport(ctx, e.ws, step, try, rep, verdictWait)
	var refused *engine.RefusedError
	switch {
	case errors.As(err, &refused):
		return false, refused.Reasons, nil
	case errors.Is(err, engine.ErrNoVerdict):
		return false, nil, fmt.Errorf("is the sidecar that holds %s running? (%w)", e.ws.Dir, err)
	case err != nil:
		return false, nil, err
	}
	return true, nil, nil
}

func (e *filesEngine) Retry(_ context.Context, step string) error {
	return e.queue(core.Trigger{Step: step, Retry: true, From: "mcp"})
}

func (e *filesEngine) Trigger(_ context.Context, step string) error {
	return e.queue(core.Trigger{Step: step, From: "mcp"})
}

func (e *filesEngine) Budget(_ context.Context, step string, changes []string) error {
	return engine.EnqueueBudget(e.ws, step, changes)
}

func (e *filesEngine) queue(t core.Trigger) error {
	return engine.Enqueue(e.ws, t)
}

// waitDir runs act once dir is watched, then waits for done to hold, re-checking
// on every change in dir, until timeout.
func waitDir(ctx context.Context, dir string, timeout time.Duration, act func() error, done func() bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	held := false
	cfg := watcher.Config{Root: filepath.Dir(dir), Paths: []string{filepath.Base(dir)}, Settle: time.Millisecond}
	err := watcher.Follow(ctx, cfg, func(b *watcher.Batch) (time.Duration, bool, error) {
		if b == nil && act != nil {
			err := act()
			act = nil
			if err != nil {
				return 0, true, err
			}
		}
		held = done()
		return 0, held, nil
	})
	switch {
	case err != nil || held:
		return err
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return errors.New("timed out")
	}
	return ctx.Err()
}
