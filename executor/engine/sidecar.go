package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
	"github.com/stepseq/stepseq/watcher"
)

// DefaultSettle is the sidecar's coalescing window. The first change after a quiet
// spell is delivered at once (a gate opens without waiting); what follows within
// the window is gathered into the next pass, so an editor's save or a git checkout
// is a few passes, not thousands.
const DefaultSettle = 5 * time.Millisecond

// ErrPlanBlocked is returned by Run with ExitWhenDone when the plan is held by a
// blocker, so that `watch --exit-when-done` exits 1.
var ErrPlanBlocked = errors.New("plan is blocked")

// refusedAgent is a plan refused for its agent, a configuration error (exit 2) as
// an unsafe STEP_AGENT_CMD is.
type refusedAgent struct{ err error }

func (e *refusedAgent) Error() string   { return e.err.Error() }
func (e *refusedAgent) Unwrap() []error { return []error{e.err, core.ErrConfig} }

// SidecarOptions configure a sidecar.
type SidecarOptions struct {
	PlansDir     string        // where plan files are dropped; default DIR/plans
	Settle       time.Duration // watcher coalescing window; 0: DefaultSettle
	Poll         time.Duration // >0: poll instead of file events
	ExitWhenDone bool          // Run returns once the plan is DONE (nil), blocked (ErrPlanBlocked) or cannot launch (ErrConfig)
	Metrics      *Metrics      // nil: no metrics
	Notifier     Notifier      // nil: transitions are journaled only
	// TriggerQuiet is how long the trigger folder must be still before it is
	// drained; 0: DefaultTriggerQuiet.
	TriggerQuiet time.Duration
	// TriggerHold is how long at most a trigger waits for a burst to end, the
	// folder never still for the quiet window; 0: DefaultTriggerHold.
	TriggerHold time.Duration
	// PlanSettle is how long a plan file that does not parse must have been
	// still before it is judged: its writer may be midway; 0:
	// DefaultPlanSettle.
	PlanSettle time.Duration
	// OnChange is called from the loop after each state write and notification,
	// for readers of the state file (the live page) to look again.
	OnChange func()
	// MaxAgents bounds the agent processes launched at once across the
	// workspace's runs; 0: DefaultMaxAgents; negative: no bound.
	// Pulled steps (agent: mcp) do not count.
	MaxAgents int
	// OnReady is called from the loop once, when the start is over (every run
	// taken up, the triggers queued before it drained), just before the ready
	// record.
	OnReady func()
}

// Sidecar is `stepseq watch`: one event loop owns every run's state machine and
// feeds it every input — coalesced file events, agent exits, timers, calls — and
// nothing else. It never polls (unless asked to); idle, it sleeps.
type Sidecar struct {
	*Runtime
	opt  SidecarOptions
	cfg  core.MachineConfig // every run's machine, less its trigger folder
	lock *store.Lock
	main *Run // the run whose file is state.json
	w    *watcher.Watcher
	wcfg watcher.Config

	plansSeen  map[string]string // plan file → the content hash last judged
	copiesTold map[string]bool   // run files told to be copies of another run, not driven
	held       heldFiles         // plan and run files held for a sandboxed agent
	refused    error             // with no state: why every plan file in the folder was refused
	// plansTooBig are the plan contents refused at intake for their state's size
	// (path and hash), judged invalid until the file changes.
	plansTooBig map[[2]string]error
	intakeDue   bool      // the main run's machine asked for another plan intake (core.IntakePlans)
	applying    *applying // the plan handed to the machine, until state.json holds it

	watchLimited atomic.Bool // a watch limit leaves part of the workspace polled
	sidecarCalls

	ready atomic.Bool
	// starting: the start's drains of the triggers queued before it are not
	// all back yet; startDrains counts those in flight.
	starting    bool
	startDrains int
	alive       atomic.Bool
	passes      atomic.Uint64

	longest atomic.Int64 // the longest turn of the loop, in ns
	hb      Heartbeat    // when the loop last turned, for /healthz

	sidecarRuns // every run the loop drives, and what they share (sidecar_runs.go)
}

// DefaultTriggerQuiet is how long the trigger folder must be still before it is
// drained, DefaultTriggerHold how long at most a trigger waits for a burst to
// end, and DefaultPlanSettle how long a plan file that does not parse waits for
// its writer: the machine's timers.
const (
	DefaultTriggerQuiet = core.DefaultTriggerQuiet
	DefaultTriggerHold  = core.DefaultTriggerHold
	DefaultPlanSettle   = core.DefaultPlanSettle
)

// NewSidecar takes the workspace lock and arms the watcher. A second sidecar on the
// same workspace fails with ErrLocked naming the holder.
func NewSidecar(rt *Runtime, opt SidecarOptions) (*Sidecar, error) {
	if opt.Settle <= 0 {
		opt.Settle = DefaultSettle
	}
	if opt.TriggerQuiet <= 0 {
		opt.TriggerQuiet = DefaultTriggerQuiet
	}
	switch {
	case opt.PlansDir == "":
		opt.PlansDir = filepath.Join(rt.WS.Dir, "plans")
	case !filepath.IsAbs(opt.PlansDir):
		// Relative to the working directory, as given on the command line; the
		// watch set is relative to the workspace.
		abs, err := filepath.Abs(opt.PlansDir)
		if err != nil {
			return nil, fmt.Errorf("plans folder %s: %w", opt.PlansDir, err)
		}
		opt.PlansDir = abs
	}
	maxRetries, err := proc.MaxRetriesFromEnv(rt.Getenv)
	if err != nil {
		return nil, err
	}
	key, err := PullKey(rt.WS)
	if err != nil {
		return nil, err
	}
	lock, holder, err := store.TryLock(rt.WS, "watch")
	if errors.Is(err, store.ErrLocked) {
		return nil, fmt.Errorf("%w: %s %d holds %s; stop it first (one sidecar per workspace)", store.ErrLocked, holder.Kind, holder.PID, rt.WS.LockPath())
	}
	if err != nil {
		return nil, err
	}
	rt.Lock = lock
	s := &Sidecar{Runtime: rt, opt: opt, lock: lock, plansSeen: map[string]string{}, plansTooBig: map[[2]string]error{}}
	s.cfg = core.MachineConfig{Driver: "watch", MaxRetries: maxRetries, Persistent: true,
		TriggerQuiet: opt.TriggerQuiet, TriggerHold: opt.TriggerHold, PlanSettle: opt.PlanSettle}
	s.initCalls(key)
	s.wcfg = watcher.Config{Settle: opt.Settle, Poll: opt.Poll, Logger: rt.Logger.With("component", "watcher"),
		OnLimit: func(err error) { s.watchLimited.Store(err != nil) }}
	s.initRuns()
	s.main = s.newRun(store.MainRun, &store.StateFile{Path: rt.WS.State})
	// The first watch set comes from the state as it is, so that nothing written
	// between now and the first pass is missed. The first pass takes the state
	// as read here when the file has not changed since.
	d := s.main.d
	var conds *Conditions
	st, _ := d.sf.Preread()
	if st != nil {
		conds, _ = rt.Conditions(st)
	}
	paths, trees := WatchSet(rt.WS, opt.PlansDir, st, conds)
	d.setWatch(core.SetWatch{Paths: paths, Trees: trees})
	if s.w == nil {
		lock.Unlock()
		return nil, fmt.Errorf("watch %s: the watcher did not start; see the log", rt.WS.Dir)
	}
	s.alive.Store(true)
	return s, nil
}

// Ready reports whether the first pass is done and the watches are set: not while
// an inotify limit leaves part of the workspace polled (fs.inotify.max_user_watches).
func (s *Sidecar) Ready() bool { return s.ready.Load() && !s.watchLimited.Load() }

// Alive reports whether the loop and the watcher are running.
func (s *Sidecar) Alive() bool { return s.alive.Load() }

// Healthy reports whether the loop runs and has not been stuck in one turn, nor
// left work untaken, for longer than bound: /healthz.
func (s *Sidecar) Healthy(now time.Time, bound time.Duration) bool {
	return s.Alive() && s.hb.Healthy(now, bound)
}

// Passes counts the inputs the loop took.
func (s *Sidecar) Passes() uint64 { return s.passes.Load() }

// LongestTurn is the longest time the loop spent on one input.
func (s *Sidecar) LongestTurn() time.Duration { return time.Duration(s.longest.Load()) }

func (s *Sidecar) turned(began time.Time) {
	d := int64(time.Since(began))
	for {
		old := s.longest.Load()
		if d <= old || s.longest.CompareAndSwap(old, d) {
			return
		}
	}
}

// WatcherStats are the watcher's counters.
func (s *Sidecar) WatcherStats() watcher.Stats { return s.w.Stats() }

// Run is the event loop. It returns nil after a graceful stop (ctx ended: the agents
// get SIGTERM, then SIGKILL after the grace period) or, with ExitWhenDone, once
// the main run's plan is DONE; ErrPlanBlocked once it is blocked.
func (s *Sidecar) Run(ctx context.Context) error {
	s.ctx, s.main.d.ctx = ctx, ctx
	defer s.close()
	s.record(core.Entry{Event: "start", Detail: map[string]any{"pid": s.lock.Holder.PID, "state": s.WS.State}})
	// The triggers queued before the start are a burst already over: drained at
	// once. Ready once those drains are back (drained): a trigger written after
	// ready is never taken by the start's drain, which would split a burst that
	// began after the start into the start's part and the rest.
	s.starting = true
	s.holdLaunches = true
	s.pass(watcher.Batch{Rescan: true})
	s.main.d.feed(core.TriggersQueued{Now: true})
	s.releaseLaunches()
	for {
		if end, err := s.ended(); end {
			return err
		}
		s.hb.Turned(time.Now())
		began, stop, err := s.turn(ctx)
		if stop {
			return err
		}
		s.startWaiting()
		s.opt.Metrics.observe(s.main.d.m.State())
		s.countAgents()
		s.turned(began)
	}
}

// turn waits for one input and takes it: a watcher batch, an agent's exit, a
// run's timer, a call, a drain come back. It returns when the input came, and
// stop with the loop's end.
func (s *Sidecar) turn(ctx context.Context) (began time.Time, stop bool, err error) {
	select {
	case <-ctx.Done():
		return began, true, s.shutdown()
	case b, ok := <-s.batches():
		if !ok {
			s.alive.Store(false)
			return began, true, errors.New("watcher stopped")
		}
		began = time.Now()
		s.pass(b)
	case err, ok := <-s.watchErrors():
		began = time.Now()
		if ok {
			s.Logger.Error("watcher", "err", err)
			s.record(core.Entry{Event: "watcher-error", Reason: err.Error()})
		}
	case ev := <-s.runExits:
		began = time.Now()
		s.took()
		s.runExited(ev)
	case r := <-s.runTimers:
		began = time.Now()
		s.took()
		s.timerFired(r)
	case r := <-s.runInherit:
		began = time.Now()
		s.inheritedGone(r)
	case call := <-s.calls:
		began = time.Now()
		s.took()
		call()
		s.after(s.main)
	case r := <-s.drains:
		began = time.Now()
		s.took()
		s.drained(r)
	}
	return began, false, nil
}

// ended says whether, with ExitWhenDone, the loop is over, and with what: the
// main run's plan is DONE (nil), blocked, refused or unable to launch.
func (s *Sidecar) ended() (bool, error) {
	m := s.main.d.m
	if !s.opt.ExitWhenDone || s.main.drain || m.TriggersPending() {
		// Triggers not yet drained may re-run a step: the plan is not over.
		return false, nil
	}
	switch {
	case m.Done():
		s.Logger.Info("plan is DONE: exiting")
		return true, nil
	// Each end below is returned, and main prints it: it is not logged too.
	case m.Blocked():
		why := strings.Join(m.State().Blockers, "; ")
		if why == "" {
			why = m.State().Settings.BudgetHeld // held by its budget, no step blocked
		}
		return true, fmt.Errorf("%w: %s", ErrPlanBlocked, why)
	case s.refused != nil && m.State() == nil:
		if errors.Is(s.refused, planspec.ErrAgentRunsCode) {
			return true, &refusedAgent{s.refused} // the plan's agent refused: a configuration error
		}
		return true, s.refused
	case m.CannotLaunch() != nil:
		// This process's environment and flags do not change: the plan
		// can never go on here, so waiting for it would be forever.
		return true, m.CannotLaunch()
	}
	return false, nil
}

func (s *Sidecar) rel(p string) string {
	r, err := filepath.Rel(s.WS.Dir, p)
	if err != nil {
		return p
	}
	return filepath.ToSlash(r)
}

// under reports whether the slash path p is dir or inside it.
func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// StartState is the main run's state as NewSidecar read it, until Run's first
// pass takes it up: nil when there was none or it could not be read.
func (s *Sidecar) StartState() *planspec.State { return s.main.d.sf.PrereadState() }
