package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
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
	// workspace's runs (DESIGN §14); 0: DefaultMaxAgents; negative: no bound.
	// Pulled steps (agent: mcp) do not count.
	MaxAgents int
	// OnReady is called from the loop once, when the start is over (every run
	// taken up, the triggers queued before it drained), just before the ready
	// record.
	OnReady func()
}

// Sidecar is `stepseq watch`: one event loop owns the state machine and feeds it
// every input — coalesced file events, agent exits, the one timer — and nothing
// else. It never polls (unless asked to); idle, it sleeps.
type Sidecar struct {
	*Runtime
	opt  SidecarOptions
	d    *driver
	lock *store.Lock

	plansSeen map[string]string // plan file → the content hash last judged
	refused   error             // with no state: why every plan file in the folder was refused
	// plansTooBig are the plan contents refused at intake for their state's size
	// (path and hash), judged invalid until the file changes.
	plansTooBig map[[2]string]error

	watchLimited atomic.Bool // a watch limit leaves part of the workspace polled
	sidecarCalls

	ready atomic.Bool
	// starting: the start's drain of the triggers queued before it is not back yet.
	starting bool
	alive    atomic.Bool
	passes   atomic.Uint64

	// The trigger folder is drained off the loop once the machine says it has
	// been quiet for opt.TriggerQuiet (core.DrainTriggers), so that a burst of
	// triggers is one drain, one input, one re-run.
	drain      chan drained // the drain in flight; nil when none
	drainAgain bool         // the folder changed during the drain: drain it again
	intakeDue  bool         // the machine asked for another plan intake (core.IntakePlans)
	applying   *applying    // the plan handed to the machine, until state.json holds it

	longest atomic.Int64 // the longest turn of the loop, in ns
	hb      Heartbeat    // when the loop last turned, for /healthz

	sidecarRuns // the runs beside the workspace's own (sidecar_runs.go)
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

type drained struct {
	triggers []core.Trigger
	errs     []error
}

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
	s.d = newDriver(context.Background(), rt, &store.StateFile{Path: rt.WS.State}, lock,
		core.MachineConfig{Driver: "watch", MaxRetries: maxRetries, Persistent: true,
			TriggerQuiet: opt.TriggerQuiet, TriggerHold: opt.TriggerHold, TriggersDir: s.rel(rt.WS.TriggersDir()),
			PlanSettle: opt.PlanSettle})
	s.d.onDrain = s.startDrain
	s.d.onIntake = func() { s.intakeDue = true }
	s.d.onWritten = s.planWritten
	s.d.returnsConfigErr = opt.ExitWhenDone // Run returns CannotLaunch
	s.d.plans = opt.PlansDir
	s.d.metrics = opt.Metrics
	s.d.notifier = opt.Notifier
	s.initCalls(key)
	s.d.onChange = opt.OnChange
	s.d.wcfg = watcher.Config{Settle: opt.Settle, Poll: opt.Poll, Logger: rt.Logger.With("component", "watcher"),
		OnLimit: func(err error) { s.watchLimited.Store(err != nil) }}
	s.initRuns()
	// The first watch set comes from the state as it is, so that nothing written
	// between now and the first pass is missed. The first pass takes the state
	// as read here when the file has not changed since.
	var conds *Conditions
	st, _ := s.d.sf.Preread()
	if st != nil {
		conds, _ = rt.Conditions(st)
	}
	paths, trees := WatchSet(rt.WS, opt.PlansDir, st, conds)
	s.d.setWatch(core.SetWatch{Paths: paths, Trees: trees})
	if s.d.w == nil {
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
func (s *Sidecar) WatcherStats() watcher.Stats { return s.d.w.Stats() }

// Run is the event loop. It returns nil after a graceful stop (ctx ended: the agent
// gets SIGTERM, then SIGKILL after the grace period) or, with ExitWhenDone, once
// the plan is DONE; ErrPlanBlocked once it is blocked.
func (s *Sidecar) Run(ctx context.Context) error {
	s.d.ctx = ctx
	defer s.close()
	s.record(core.Entry{Event: "start", Detail: map[string]any{"pid": s.lock.Holder.PID, "state": s.WS.State}})
	s.pass(watcher.Batch{Rescan: true})
	// The triggers queued before the start are a burst already over: drained at
	// once. Ready once that drain is back (drained): a trigger written after
	// ready is never taken by the start's drain, which would split a burst that
	// began after the start into the start's part and the rest.
	s.starting = true
	s.d.feed(core.TriggersQueued{Now: true})
	for {
		if s.opt.ExitWhenDone && s.drain == nil && !s.d.m.TriggersPending() {
			// Triggers not yet drained may re-run a step: the plan is not over.
			switch {
			case s.d.m.Done():
				s.Logger.Info("plan is DONE: exiting")
				return nil
			// Each end below is returned, and main prints it: it is not logged too.
			case s.d.m.Blocked():
				why := strings.Join(s.d.m.State().Blockers, "; ")
				return fmt.Errorf("%w: %s", ErrPlanBlocked, why)
			case s.refused != nil && s.d.m.State() == nil:
				if errors.Is(s.refused, planspec.ErrAgentRunsCode) {
					return &refusedAgent{s.refused} // the plan's agent refused: a configuration error
				}
				return s.refused
			case s.d.m.CannotLaunch() != nil:
				// This process's environment and flags do not change: the plan
				// can never go on here, so waiting for it would be forever.
				return s.d.m.CannotLaunch()
			}
		}
		var began time.Time
		s.hb.Turned(time.Now())
		select {
		case <-ctx.Done():
			return s.shutdown()
		case b, ok := <-s.d.batches():
			began = time.Now()
			if !ok {
				s.alive.Store(false)
				return errors.New("watcher stopped")
			}
			s.pass(b)
		case err, ok := <-s.d.watchErrors():
			began = time.Now()
			if ok {
				s.Logger.Error("watcher", "err", err)
				s.record(core.Entry{Event: "watcher-error", Reason: err.Error()})
			}
		case exit := <-s.d.exits():
			began = time.Now()
			s.took()
			s.d.finish(exit)
			s.afterPlan()
		case ev := <-s.runExits:
			began = time.Now()
			s.took()
			s.runExited(ev)
		case r := <-s.runTimers:
			began = time.Now()
			s.took()
			if s.runs[r.name] == r {
				r.d.feed(core.TimerFired{})
				s.afterRun(r)
			}
		case r := <-s.runInherit:
			began = time.Now()
			if s.runs[r.name] == r {
				r.d.inherited = nil
				r.d.feed(core.InheritedGone{})
			}
		case <-s.d.timer.C:
			began = time.Now()
			s.took()
			s.d.feed(core.TimerFired{})
			if s.intakeDue {
				s.intakeDue = false
				s.intakePlans()
			}
			s.afterPlan()
		case call := <-s.calls:
			began = time.Now()
			s.took()
			call()
			s.afterPlan()
		case <-s.d.inherited:
			began = time.Now()
			s.d.inherited = nil
			s.d.feed(core.InheritedGone{})
		case r := <-s.drain:
			began = time.Now()
			s.took()
			s.drained(r)
			s.afterPlan()
		}
		s.startWaiting()
		s.opt.Metrics.observe(s.d.m.State())
		s.opt.Metrics.runningAgents(s.liveAgents())
		s.turned(began)
	}
}

// pass takes one batch of changes: the state file, the plans, the triggers and the
// reports it names, then the change itself.
func (s *Sidecar) pass(b watcher.Batch) {
	s.Logger.Debug("pass", "paths", b.Paths, "rescan", b.Rescan)
	s.opt.Metrics.pass()
	s.took()
	if len(b.Paths) > 0 && s.d.lastGate.IsZero() && s.d.active == nil {
		s.d.lastGate = time.Now().Add(-s.opt.Settle)
	}
	stateChanged, plansChanged, triggersChanged := b.Rescan, b.Rescan, b.Rescan
	state, plans, triggers := s.rel(s.WS.State), s.rel(s.opt.PlansDir), s.rel(s.WS.TriggersDir())
	for _, p := range b.Paths {
		switch {
		case p == state:
			stateChanged = true
		case under(p, plans):
			plansChanged = true
		case under(p, triggers):
			triggersChanged = true
		}
	}
	if stateChanged {
		s.d.readState()
	}
	if plansChanged {
		s.intakePlans()
	}
	if triggersChanged {
		s.triggersChanged()
	}
	s.d.batch(s.mainBatch(b))
	s.afterPlan()
	if s.d.active == nil {
		s.d.lastGate = time.Time{}
	}
	s.passRuns(b)
}

// triggersChanged tells the machine the trigger folder changed, with the
// folder's time: the machine's quiet window (re)starts.
func (s *Sidecar) triggersChanged() {
	in := core.TriggersQueued{}
	if mod, ok := folderModTime(s.WS.TriggersDir()); ok {
		in.Modified = mod
	}
	s.d.feed(in)
}

// folderModTime is a folder's modification time: when an entry last came or went.
func folderModTime(path string) (time.Time, bool) {
	fi, err := os.Stat(path)
	if err != nil || !fi.IsDir() {
		return time.Time{}, false
	}
	return fi.ModTime(), true
}

// startDrain reads and removes the queued triggers off the loop: ten thousand files
// are I/O the loop must not wait on.
func (s *Sidecar) startDrain() {
	if s.drain != nil {
		s.drainAgain = true
		return
	}
	ch := make(chan drained, 1)
	s.drain = ch
	ws := s.WS
	go func() {
		ts, errs := DrainTriggers(ws)
		ch <- drained{triggers: ts, errs: errs}
	}()
}

// drained hands the machine what a drain read, as one input.
func (s *Sidecar) drained(r drained) {
	s.drain = nil
	if s.starting {
		s.starting = false
		if s.opt.OnReady != nil {
			s.opt.OnReady()
		}
		s.ready.Store(true)
		s.record(core.Entry{Event: "ready", Detail: map[string]any{"watches": s.d.w.Stats().Watches}})
	}
	for _, err := range r.errs {
		s.Logger.Warn("ignored a trigger", "err", err)
	}
	if len(r.triggers) > 0 {
		s.d.feed(core.TriggersIn{Triggers: r.triggers})
	}
	if s.drainAgain {
		s.drainAgain = false
		s.startDrain()
	}
}

// requeue puts back the triggers a drain took from the folder when the sidecar
// stops before it could act on them, each distinct request once: the next
// stepseq takes them.
func (s *Sidecar) requeue(ts []core.Trigger) {
	seen := map[core.Trigger]bool{}
	for _, t := range ts {
		t.At = ""
		if seen[t] {
			continue
		}
		seen[t] = true
		if err := WriteTrigger(s.WS, t); err != nil {
			s.Logger.Warn("trigger lost at stop", "step", t.Step, "err", err)
		}
	}
}

// took counts an input the loop takes, and marks the loop busy until its turn ends.
func (s *Sidecar) took() {
	s.passes.Add(1)
	s.hb.Busy(time.Now())
}

// afterPlan lets the next plan waiting in the folder start once one is over.
func (s *Sidecar) afterPlan() {
	m := s.d.m
	if st := m.TakeRemoved(); st != nil {
		s.keepRemoved(st)
	}
	// With no state file (removed, or never written), a plan waits for nothing
	// but a try of the removed run still in flight.
	if m.Done() || m.State() == nil && m.Err() == nil && !m.Busy() {
		s.intakePlans()
	}
}

func (s *Sidecar) close() {
	s.alive.Store(false)
	s.endCalls()
	s.d.timer.Stop()
	if s.drain != nil {
		s.requeue((<-s.drain).triggers)
		s.drain = nil
	}
	s.d.closeWatcher()
	close(s.loopDone)
	s.Lock = nil
	_ = s.lock.Unlock()
}

// shutdown stops launching, ends a running agent's group (SIGTERM, then SIGKILL
// after the grace period) and records the interruption. The step stays
// IN_PROGRESS: the next start retries it without spending a try.
func (s *Sidecar) shutdown() error {
	s.Logger.Info("stopping")
	s.record(core.Entry{Event: "stopping", Reason: "signal or context end"})
	s.d.stopActive()
	s.stopRuns()
	s.record(core.Entry{Event: "stop"})
	return nil
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
