package executor

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/stepseq/stepseq/planspec"
	"github.com/stepseq/stepseq/watcher"
)

// DefaultSettle is the sidecar's coalescing window: long enough to make one pass of
// an editor's save or a git checkout, short enough that a gate opens at once.
const DefaultSettle = 5 * time.Millisecond

// SidecarOptions configure a sidecar.
type SidecarOptions struct {
	PlansDir     string        // where plan files are dropped; default DIR/plans
	Settle       time.Duration // watcher coalescing window; 0: DefaultSettle
	Poll         time.Duration // >0: poll instead of file events
	ExitWhenDone bool          // Run returns once the plan is DONE
	Metrics      *Metrics      // nil: no metrics
}

// Sidecar is `stepseq watch`: one event loop owns the state and runs the reconcile
// core on every input — coalesced file events, agent exits, one timer — and nothing
// else. It never polls (unless asked to); idle, it sleeps.
type Sidecar struct {
	*Runtime
	opt  SidecarOptions
	w    *watcher.Watcher
	sf   *StateFile
	lock *Lock

	// Owned by the loop goroutine.
	st        *planspec.State // last good state; nil when there is none
	conds     *Conditions
	bad       error // the state file on disk does not parse: never overwrite it
	badTries  int
	badAt     time.Time // when to read it again
	active    *Active
	awaiting  *awaiting
	pending   *awaiting // an exit to judge once the state file parses again
	inherited chan struct{}
	delayAt   time.Time
	triggers  []Trigger
	agentRuns [][2]time.Time // when recent agents ran: their changes trigger nothing
	onHandled time.Time      // changes up to this time have had their on: re-run
	watched   [2][]string
	lastGate  time.Time // first event of the batch that may open a gate
	plansSeen map[string]string
	told      Decision // the last decision logged, so a wait is logged once

	ready  atomic.Bool
	alive  atomic.Bool
	passes atomic.Uint64
}

// awaiting is a finished try not judged yet: it exited 0 before its required
// outputs appeared, or the state file did not parse when it ended.
type awaiting struct {
	step     string
	exit     Exit
	deadline time.Time
}

// NewSidecar takes the workspace lock and arms the watcher. A second sidecar on the
// same workspace fails with ErrLocked naming the holder.
func NewSidecar(rt *Runtime, opt SidecarOptions) (*Sidecar, error) {
	if opt.Settle <= 0 {
		opt.Settle = DefaultSettle
	}
	if opt.PlansDir == "" {
		opt.PlansDir = filepath.Join(rt.WS.Dir, "plans")
	}
	lock, holder, err := TryLock(rt.WS, "watch")
	if errors.Is(err, ErrLocked) {
		return nil, fmt.Errorf("%w: %s %d holds %s; stop it first (one sidecar per workspace)", ErrLocked, holder.Kind, holder.PID, rt.WS.LockPath())
	}
	if err != nil {
		return nil, err
	}
	rt.Lock = lock
	s := &Sidecar{Runtime: rt, opt: opt, sf: &StateFile{Path: rt.WS.State}, lock: lock, plansSeen: map[string]string{}}
	s.loadState()
	paths, trees := s.watchSet()
	s.w, err = watcher.New(watcher.Config{Root: rt.WS.Dir, Paths: paths, Trees: trees, Settle: opt.Settle, Poll: opt.Poll,
		Logger: rt.Logger.With("component", "watcher")})
	if err != nil {
		lock.Unlock()
		return nil, err
	}
	s.watched = [2][]string{paths, trees}
	s.alive.Store(true)
	return s, nil
}

// Ready reports whether the first pass is done and the watches are set.
func (s *Sidecar) Ready() bool { return s.ready.Load() }

// Alive reports whether the loop and the watcher are running.
func (s *Sidecar) Alive() bool { return s.alive.Load() }

// Passes counts the reconcile passes run.
func (s *Sidecar) Passes() uint64 { return s.passes.Load() }

// WatcherStats are the watcher's counters.
func (s *Sidecar) WatcherStats() watcher.Stats { return s.w.Stats() }

// Run is the event loop. It returns nil after a graceful stop (ctx ended: the agent
// gets SIGTERM, then SIGKILL after the grace period) or, with ExitWhenDone, once
// the plan is DONE.
func (s *Sidecar) Run(ctx context.Context) error {
	defer s.close()
	s.record(Entry{Event: "start", Detail: map[string]any{"pid": s.lockPID(), "state": s.WS.State}})
	s.pass(ctx, passInput{all: true})
	s.ready.Store(true)
	s.record(Entry{Event: "ready", Detail: map[string]any{"watches": s.w.Stats().Watches}})
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		if s.opt.ExitWhenDone && s.finished() {
			s.Logger.Info("plan is DONE: exiting")
			return nil
		}
		var exits <-chan Exit
		if s.active != nil {
			exits = s.active.Done()
		}
		s.armTimer(timer)
		select {
		case <-ctx.Done():
			return s.shutdown()
		case b, ok := <-s.w.Batches():
			if !ok {
				s.alive.Store(false)
				return errors.New("watcher stopped")
			}
			s.pass(ctx, passInput{batch: b})
		case err, ok := <-s.w.Errors():
			if ok {
				s.Logger.Error("watcher", "err", err)
				s.record(Entry{Event: "watcher-error", Reason: err.Error()})
			}
		case exit := <-exits:
			s.finishTry(exit)
			s.pass(ctx, passInput{})
		case <-timer.C:
			s.pass(ctx, passInput{timer: true})
		case <-s.inherited:
			s.inherited = nil
			s.pass(ctx, passInput{})
		}
	}
}

func (s *Sidecar) lockPID() int { return s.lock.holder.PID }

func (s *Sidecar) finished() bool {
	return s.st != nil && s.st.Status == planspec.StatusDone && s.active == nil && s.awaiting == nil
}

// armTimer sets the one timer to the earliest thing the loop waits for.
func (s *Sidecar) armTimer(t *time.Timer) {
	var next time.Time
	for _, at := range []time.Time{s.delayAt, s.badAt} {
		if !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	if s.awaiting != nil && (next.IsZero() || s.awaiting.deadline.Before(next)) {
		next = s.awaiting.deadline
	}
	t.Stop()
	if !next.IsZero() {
		t.Reset(max(time.Until(next), 0))
	}
}

func (s *Sidecar) close() {
	s.alive.Store(false)
	if err := s.w.Close(); err != nil {
		s.Logger.Warn("closing watcher", "err", err)
	}
	s.Lock = nil
	_ = s.lock.Unlock()
}

// shutdown stops launching, ends a running agent's group (SIGTERM, then SIGKILL
// after the grace period) and records the interruption. The step stays
// IN_PROGRESS: the next start retries it without spending a try.
func (s *Sidecar) shutdown() error {
	s.Logger.Info("stopping")
	s.record(Entry{Event: "stopping", Reason: "signal or context end"})
	if s.active != nil {
		a := s.active
		a.Stop()
		exit := <-a.Done()
		s.Finished(a, exit)
		s.active = nil
		s.record(Entry{Event: "interrupted", Step: a.Step, Try: a.Try, Reason: "sidecar stopped; the step is retried on the next start"})
		s.Logger.Warn("agent stopped by shutdown; the step will be retried", "step", a.Step, "try", a.Try)
	}
	s.record(Entry{Event: "stop"})
	return nil
}

// watchSet is what the current plan needs watched.
func (s *Sidecar) watchSet() (paths, trees []string) {
	return WatchSet(s.WS, s.opt.PlansDir, s.st, s.conds)
}

// rewatch updates the watcher when the plan changed what it names.
func (s *Sidecar) rewatch() {
	paths, trees := s.watchSet()
	if slices.Equal(paths, s.watched[0]) && slices.Equal(trees, s.watched[1]) {
		return
	}
	if err := s.w.Update(paths, trees); err != nil {
		s.Logger.Error("updating watches", "err", err)
		return
	}
	s.watched = [2][]string{paths, trees}
	s.record(Entry{Event: "watch", Detail: map[string]any{"paths": paths, "trees": trees}})
}
