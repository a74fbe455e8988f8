package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
	"github.com/stepseq/stepseq/watcher"
)

// Notifier takes the machine's transitions for the user (executor/notify is one).
type Notifier interface {
	Notify(core.Notification)
}

// Publisher is a Notifier that holds its notifications from its sinks until
// Publish: the driver publishes once an input's state writes are done, so
// that a notification never reaches anyone before the state that holds what
// it says.
type Publisher interface {
	Publish()
}

// Syncer is a Notifier whose notifications are on disk only once Sync returns.
// The driver syncs it once an input's effects are done, beside the state's
// folder, so that the notifications of an input cost one fsync.
type Syncer interface {
	Sync() error
}

// driver carries out the machine's effects for every driver: it writes and reads
// the state file, starts and stops agents through a Launcher, keeps the watches and
// the one timer, and feeds back what happened. `check`, `step` and `watch` differ
// only in what they wait on and when they stop.
type driver struct {
	rt       *Runtime
	m        *core.Machine
	sf       *store.StateFile
	lock     *store.Lock
	launcher proc.Launcher
	pull     *PullLauncher // steps whose agent is mcp; nil: none can run here
	verdict  func(core.ReportVerdict)
	notifier Notifier
	onChange func() // after a state write or a notification: SidecarOptions.OnChange
	// onDrain and onIntake carry out the machine's DrainTriggers and
	// IntakePlans (the sidecar's); nil: ignored.
	onDrain, onIntake func()
	// onWritten follows each state write that succeeded, with the state
	// Written; nil: none.
	onWritten func(*planspec.State)
	metrics   *Metrics
	ctx       context.Context
	// returnsConfigErr: the driver ends with a configuration error that keeps
	// the plan from launching (check, step, watch --exit-when-done), so the
	// machine's line saying it is not logged as well.
	returnsConfigErr bool

	queue    []core.Effect
	draining bool

	active    *activeTry
	fellBack  []core.Limit   // the limits of the try handed to its next agent
	held      *activeTry     // an exited try whose group is left while the machine awaits its outputs
	ending    sync.WaitGroup // held groups being stopped
	timer     *time.Timer
	w         *watcher.Watcher
	wcfg      watcher.Config // how to make the watcher when a one-shot driver first needs one
	plans     string         // the plans folder, for the watch set
	watched   [2][]string
	watchedOK bool // the watcher holds watched: a delta may apply to it
	inherited chan struct{}
	lastGate  time.Time // first change of the batch that may open a gate

	// A sidecar drives many runs' drivers; these hooks, nil for a
	// one-shot driver, hand it what it shares between them.
	runHooks
	// driverLanes hold a graph's tries running side by side (driver_lanes.go).
	driverLanes
	swept bool // the worktrees left by an earlier stepseq were taken up

	// ahead are the conditions watchAhead compiled, for the machine's first
	// read of the same state.
	ahead *Conditions

	agentFor struct { // the agent CanLaunch resolved, reused by the launch
		st    *planspec.State
		id    string
		agent proc.Agent
	}
}

type activeTry struct {
	step    string
	try     int
	run     proc.Started
	launch  core.StartAgent
	agents  []proc.Agent // the step's candidates; agents[idx] runs
	idx     int
	stopped bool          // the machine stopped it: no fallback
	limits  []core.Limit  // what the try's limited agents said so far
	tryLock *proc.HeldTry // the try lock; nil for a pulled step
}

// tryStartedIso is the agent.startedIso of step id's try: it binds a try lock's
// record to that try.
func tryStartedIso(st *planspec.State, id string) string {
	if run := st.StepRuns[id]; run != nil && run.Agent != nil {
		return run.Agent.StartedIso
	}
	return ""
}

// runHooks are what a sidecar driving many runs shares between their drivers.
type runHooks struct {
	// watchTo, when set, takes the driver's watch set instead of a watcher of
	// its own: the whole set, or with Delta what it gained and lost.
	watchTo func(core.SetWatch) error
	// admit, when set, says whether an agent may start now (--max-agents),
	// and if not why, for the journal ("" journals nothing); a try it refuses
	// waits in waiting until the sidecar starts it.
	admit   func(*driver) (ok bool, why string)
	waiting *core.StartAgent
	// launched, when set, is told of each agent started, whose exit the
	// sidecar waits on.
	launched func(proc.Started)
	// inheritedGone, when set, is called from the waiting goroutine once an
	// agent left by an earlier stepseq is gone.
	inheritedGone func()
	// sharedWatcher, when set, is the watcher that sees the driver's files
	// (the sidecar's, shared by every run): told of the driver's own changes.
	sharedWatcher func() *watcher.Watcher
	// agentsChanged, when set, is told as soon as one of the driver's agents
	// starts or ends: a try's end is counted before its verdict is written,
	// so no scrape shows the state without it.
	agentsChanged func()
}

// recordNeeded says whether a try lock's record is of a try that st has in
// progress and has not judged: a later stepseq may need the end it records.
func recordNeeded(st *planspec.State) func(proc.TryRecord) bool {
	return func(r proc.TryRecord) bool {
		run := st.StepRuns[r.Step]
		return r.Step != "" && run != nil && run.Status == planspec.StatusInProgress &&
			run.Agent != nil && run.Agent.StartedIso == r.Started
	}
}

func newDriver(ctx context.Context, rt *Runtime, sf *store.StateFile, lock *store.Lock, cfg core.MachineConfig) *driver {
	d := &driver{rt: rt, sf: sf, lock: lock, launcher: proc.ProcessLauncher{}, ctx: ctx}
	d.timer = time.NewTimer(time.Hour)
	d.timer.Stop()
	cfg.Probe = d
	cfg.Run = rt.WS.Run
	cfg.Sandbox = rt.Sandbox
	d.m = core.NewMachine(cfg)
	return d
}

// feed hands one input to the machine and carries out its effects in order. An
// effect's own answer (a write's outcome, a read) is fed back at once; the effects
// that answer brings are queued behind the ones already asked for, so the newest
// watch set and timer win.
func (d *driver) feed(in core.Input) {
	d.queue = append(d.queue, d.m.Handle(d.rt.now(), in)...)
	if d.draining {
		return
	}
	d.draining = true
	for len(d.queue) > 0 {
		e := d.queue[0]
		d.queue = d.queue[1:]
		d.perform(e)
	}
	d.draining = false
	if p, ok := d.notifier.(Publisher); ok {
		p.Publish()
	}
	d.releaseHeld()
	d.syncInput()
}

func (d *driver) perform(e core.Effect) {
	switch e := e.(type) {
	case core.WriteState:
		d.writeState(e)
	case core.ReadState:
		d.readState()
	case core.StartAgent:
		d.start(e)
	case core.StopAgent:
		d.stopAgent(e)
	case core.Notify:
		d.notify(e)
	case core.SetWatch:
		d.setWatch(e)
	case core.SetTimer:
		d.timer.Stop()
		if !e.At.IsZero() {
			d.timer.Reset(max(e.At.Sub(d.rt.now()), 0))
		}
	case core.JournalEntry:
		d.journal(e)
	case core.Log:
		if e.ConfigErr && d.returnsConfigErr {
			return
		}
		d.rt.Logger.Log(d.ctx, e.Level, e.Msg, e.Args...)
	case core.ReportVerdict:
		d.reportVerdict(e)
	case core.WaitInherited:
		d.waitInherited(e.Step)
	case core.DrainTriggers, core.IntakePlans:
		d.intake(e)
	case core.CommitWorktree, core.MergeWorktrees:
		d.worktreeEffect(e)
	}
}

// writeState writes the state the machine holds and tells it how that went.
func (d *driver) writeState(e core.WriteState) {
	var touched []string
	all := true
	if d.metrics != nil {
		touched, all = e.State.Touched() // before the encoding forgets them
	}
	// Its own write is no activity: a gate opened a moment later is
	// still the first change after a quiet window, seen at once.
	d.expect(d.sf.Path)
	err := d.sf.WriteVisible(e.State)
	d.sweepDone(e.State, err)
	d.metrics.written(e.State, touched, all)
	if err == nil && d.onWritten != nil {
		d.onWritten(e.State)
	}
	if err == nil && d.onChange != nil {
		d.onChange()
	}
	d.feed(core.Written{Err: err})
}

// stopAgent stops a try: one waiting for --max-agents ends at once, a
// running agent (the main try or a lane's) is signalled and its exit comes
// back as any exit does.
func (d *driver) stopAgent(e core.StopAgent) {
	if d.unqueue(e.Step, e.Try) {
		now := d.rt.now()
		d.feed(core.AgentExited{Step: e.Step, Try: e.Try, Exit: core.Exit{Code: -1, Signal: syscall.SIGTERM, Started: now, Ended: now}})
	}
	if a := d.tryFor(e.Step, e.Try); a != nil {
		a.stopped = true
		a.run.Stop()
	}
}

// notify hands a transition to the notifier, named with its run.
func (d *driver) notify(e core.Notify) {
	if d.rt.WS.Run != "" {
		e.Note.Run = d.rt.WS.Run
		e.Note.Next = commandsForRun(e.Note.Next, d.rt.WS.Run)
	}
	if d.notifier != nil {
		d.notifier.Notify(e.Note)
	}
	if d.onChange != nil {
		d.onChange()
	}
}

// journal records an entry, counting a verdict's figures.
func (d *driver) journal(e core.JournalEntry) {
	d.metrics.journaled(e.Entry)
	d.rt.record(e.Entry)
}

// intake carries out the machine's DrainTriggers and IntakePlans, where the
// driver is a sidecar's.
func (d *driver) intake(e core.Effect) {
	f := d.onIntake
	if _, ok := e.(core.DrainTriggers); ok {
		f = d.onDrain
	}
	if f != nil {
		f()
	}
}

// expect announces a change the driver is about to make to a file in the
// workspace (path absolute): its own change is no activity for the watcher's
// quiet window, so a change made a moment after it is seen at once.
func (d *driver) expect(path string) {
	w := d.w
	if d.sharedWatcher != nil {
		w = d.sharedWatcher()
	}
	if w == nil {
		return
	}
	if r, err := filepath.Rel(d.rt.WS.Dir, path); err == nil {
		w.Expect(filepath.ToSlash(r))
	}
}

func (d *driver) readState() {
	st, changed, err := d.sf.ReadIfChanged()
	if err == nil && st != nil && !d.swept {
		d.swept = true
		d.sweepWorktrees(st) // those a stepseq before this one left
	}
	d.feed(core.StateRead{State: st, Err: err, Unchanged: !changed && err == nil})
}

// setAsideEarlierRun sets the logs of the step's earlier run aside as a new
// try starts, counting that run's tries as the state recorded them.
func (d *driver) setAsideEarlierRun(st *planspec.State, l core.StartAgent) {
	earlier := 0
	if run := st.StepRuns[l.Step]; run != nil && run.Agent != nil {
		earlier = run.Agent.EarlierTries
	}
	if err := d.rt.WS.SetAsideEarlierRun(l.Step, l.Try, earlier); err != nil {
		d.rt.Logger.Warn("the earlier run's logs stay where they are: this try's output follows theirs", "step", l.Step, "err", err)
	}
}

// start launches a try the state file on disk already records, with the first of
// the step's agents that can run.
func (d *driver) start(l core.StartAgent) {
	d.fellBack = nil
	st := d.m.State()
	if d.admit != nil && !st.IsPull(l.Step) {
		if ok, why := d.admit(d); !ok {
			// Over --max-agents: the try, recorded, waits for its turn.
			d.queueWaiting(l)
			if why != "" {
				d.rt.record(core.Entry{Event: "launch-queued", Step: l.Step, Try: l.Try, Reason: why})
			}
			return
		}
	}
	if !l.Resumed {
		d.setAsideEarlierRun(st, l)
	}
	if st.IsPull(l.Step) {
		// Offered to the MCP worker that asks for it: no process, no fallback.
		a, err := d.resolve(st, l.Step)
		if err != nil {
			d.feed(core.AgentExited{Step: l.Step, Try: l.Try, Exit: proc.StartFailure(err)})
			return
		}
		d.launchAgent(l, []proc.Agent{a}, 0)
		return
	}
	agents, err := d.rt.resolveAgents(st, l.Step)
	if err != nil {
		d.feed(core.AgentExited{Step: l.Step, Try: l.Try, Exit: proc.StartFailure(err)})
		return
	}
	idx := proc.NextAgent(agents, -1)
	if idx < 0 {
		_, err := d.rt.resolveAgent(st, l.Step)
		d.feed(core.AgentExited{Step: l.Step, Try: l.Try, Exit: proc.StartFailure(err)})
		return
	}
	if idx > 0 {
		// The first agents are not on PATH: each is a fallback like any other,
		// journaled as the rate-limited one is.
		d.journalFallback(l, agents, 0, idx, agents[0].Unavailable)
	}
	d.launchAgent(l, agents, idx)
}

// launchAgent starts agents[idx] for the try. One that cannot start hands the same
// try to the next candidate (a fallback, journaled, not a retry).
func (d *driver) launchAgent(l core.StartAgent, agents []proc.Agent, idx int) {
	st := d.m.State()
	agent := agents[idx]
	prompt := proc.WithReportHint(l.Prompt, reportsSetting(st, l.Step))
	argv := agent.Command(prompt, l.Changed)
	if l.Resume.ID != "" && l.Resume.Agent == agent.Name() {
		// resume: true, and this agent named its session: the retry goes on in it.
		if resumed := agent.ResumeCommand(l.Resume.ID, prompt, l.Changed); resumed != nil {
			argv = resumed
		}
	}
	spec := proc.Spec{
		Argv:      argv,
		Dir:       d.rt.WS.Dir,
		Env:       proc.AgentEnv(d.rt.Environ, l.Step, l.Try, d.rt.WS, l.Changed),
		Timeout:   StepTimeout(st, l.Step),
		Grace:     d.rt.Grace,
		PipeGrace: d.rt.PipeGrace,
		HoldGroup: st.Steps[l.Step].AwaitOutputs > 0,
	}
	if st.ResultFromOutput(l.Step) {
		spec.StdoutTail = planspec.MaxResultOutput
	}
	if dir, err := d.makeWorktree(st, l); err != nil {
		d.feed(core.AgentExited{Step: l.Step, Try: l.Try, Exit: proc.StartFailure(err)})
		return
	} else if dir != "" {
		spec.Dir = dir
	}
	if l.Sandbox != nil {
		spec = proc.InSandbox(spec, l.Sandbox, proc.SandboxTry{WS: d.rt.WS, Step: l.Step, Try: l.Try, Changed: l.Changed,
			Agent: agent, Outputs: st.Steps[l.Step].RequiredOutputs})
	}
	spec.KeepLines = agent.UsageLines()
	launcher := d.launcher
	var tl *proc.HeldTry
	if st.IsPull(l.Step) {
		launcher = d.pull
	} else {
		// The record of the agent is made, and locked, before it can run: the
		// agent inherits the lock, so the record lives as long as it does.
		h, err := proc.TakeTryLock(d.rt.WS, proc.TryRecord{Step: l.Step, Try: l.Try, Started: tryStartedIso(st, l.Step)}, recordNeeded(st))
		if err != nil {
			d.feed(core.AgentExited{Step: l.Step, Try: l.Try, Exit: proc.StartFailure(err)})
			return
		}
		tl = h
		spec.TryLock = h.File
	}
	ts := proc.TrySpec{Step: l.Step, Try: l.Try, Proc: spec, LogPath: d.rt.WS.LogPath(l.Step, l.Try),
		Prompt: l.Prompt, RequiredOutputs: slices.Clone(st.Steps[l.Step].RequiredOutputs), Result: slices.Clone(st.Steps[l.Step].Result),
		OnStart: tl.Started,
		OnShortage: func(err error) {
			d.rt.Logger.Warn("agent could not start for want of resources: starting it again after a pause; the try is not spent", "step", l.Step, "try", l.Try, "err", err)
			d.rt.record(core.Entry{Event: "launch-deferred", Step: l.Step, Try: l.Try, Reason: err.Error()})
		}}
	run, err := launcher.Launch(ts)
	if err != nil {
		tl.Ended(proc.StartFailure(err), false)
		// A sandbox that cannot be had fails the try: no other agent runs it bare.
		if next := proc.NextAgent(agents, idx); next >= 0 && !errors.Is(err, proc.ErrSandbox) {
			d.fallback(l, agents, idx, next, err.Error())
			return
		}
		d.feed(core.AgentExited{Step: l.Step, Try: l.Try, Exit: proc.StartFailure(err)})
		return
	}
	d.keepActive(&activeTry{step: l.Step, try: l.Try, run: run, launch: l, agents: agents, idx: idx, limits: d.fellBack, tryLock: tl})
	if d.launched != nil {
		d.launched(run)
	}
	d.fellBack = nil
	pid, ticks := run.Ident()
	if d.lock != nil && pid > 0 {
		d.lock.SetAgent(&store.AgentHandle{Step: l.Step, Try: l.Try, PID: pid, StartTicks: ticks})
	}
	d.rt.record(core.Entry{Event: "launch", Step: l.Step, Try: l.Try, Detail: launchDetail(pid, spec, agent)})
	d.rt.Logger.Info("agent launched", "step", l.Step, "try", l.Try, "pid", pid)
	d.metrics.launched(l.Try > 1)
	if !d.lastGate.IsZero() {
		d.metrics.gate(time.Since(d.lastGate).Seconds())
		d.lastGate = time.Time{}
	}
}

func (d *driver) fallback(l core.StartAgent, agents []proc.Agent, from, to int, reason string) {
	d.journalFallback(l, agents, from, to, reason)
	d.launchAgent(l, agents, to)
}

// journalFallback records the try's passage from agents[from], which could not
// run for reason, to agents[to]: one entry a hop, the candidates between them
// (not on PATH) each with its own reason.
func (d *driver) journalFallback(l core.StartAgent, agents []proc.Agent, from, to int, reason string) {
	for i := from; i < to; i++ {
		why := reason
		if i > from {
			why = agents[i].Unavailable
		}
		d.rt.record(proc.FallbackEntry(l.Step, l.Try, agents[i], agents[i+1], why))
		d.rt.Logger.Warn("agent unavailable: the same try goes to the next agent", "step", l.Step, "try", l.Try,
			"from", agents[i].Name(), "to", agents[i+1].Name(), "why", core.FirstChars(why, 120))
	}
}

// reportsSetting is the plan's or step's reports setting as written; "" when the
// plan says nothing of reports.
func reportsSetting(st *planspec.State, id string) string {
	if sp := st.Steps[id]; sp != nil && sp.Reports != "" {
		return sp.Reports
	}
	return st.Settings.Reports
}

// exits is the running agent's end, or nil when none runs.
func (d *driver) exits() <-chan core.Exit {
	if d.active == nil {
		return nil
	}
	return d.active.run.Done()
}

// finish takes an agent's exit: the reports it left are read first, then the
// machine judges the try.
func (d *driver) finish(exit core.Exit) { d.finishTry(d.active, exit) }

// finishTry is finish of try a, the active one or a lane's.
func (d *driver) finishTry(a *activeTry, exit core.Exit) {
	d.dropActive(a)
	a.tryLock.Ended(exit, a.stopped)
	if err := a.run.Finish(exit); err != nil {
		d.rt.Logger.Warn("agent log", "step", a.step, "err", err)
	}
	agent := a.agents[a.idx]
	usage, usageErr := agent.Usage(exit)
	d.rt.record(core.Entry{Event: "exit", Step: a.step, Try: a.try, Detail: exitDetail(exit, usage, usageErr)})
	failed, unavailable := agent.Judge(exit)
	limit, limited := agent.Limited(exit)
	if limited {
		a.limits = append(a.limits, limit)
	}
	if unavailable && !a.stopped {
		if next := proc.NextAgent(a.agents, a.idx); next >= 0 {
			a.run.EndGroup()
			d.fellBack = a.limits // the same try: its limits go on to the next agent
			d.fallback(a.launch, a.agents, a.idx, next, failed)
			return
		}
	}
	d.drainReports(a.step)
	d.hold(a)
	in := core.AgentExited{Step: a.step, Try: a.try, Exit: exit, AgentFailed: failed, Refused: agent.Refused(exit)}
	if limited && !a.stopped {
		in.Limits = a.limits // the last agent too is out of quota: every limited one counts
	}
	if id := agent.Session(exit); id != "" {
		in.Session = planspec.AgentSession{Agent: agent.Name(), ID: id}
	}
	in.Result, in.ResultErr = proc.ExitResult(d.m.State(), a.step, agent, exit)
	in.Usage, in.Agent = usage, agent.Name()
	if usageErr != nil {
		in.UsageErr = usageErr.Error()
	}
	d.feed(in)
}

// releaseHeld stops the group of an exited try once the machine no longer waits
// on it: its outputs came, its awaitOutputs window closed, or the try was dropped.
// A group that is not held is gone already, and stopping it again costs nothing.
func (d *driver) releaseHeld() {
	if a := d.held; a != nil && !d.m.Holds(a.step, a.try) {
		d.endHeld()
	}
	d.releaseLanesHeld()
}

// endHeld stops the held group away from the event loop, whose inputs do not wait
// on a grace period; stopActive waits for it.
func (d *driver) endHeld() {
	a := d.held
	if a == nil {
		return
	}
	d.held = nil
	d.ending.Add(1)
	go func() {
		defer d.ending.Done()
		a.run.EndGroup()
	}()
}

// stopActive ends a running agent at shutdown and waits for it, and for any group
// left to an awaited try.
func (d *driver) stopActive() {
	d.feed(core.Shutdown{})
	if d.active != nil {
		d.active.stopped = true
		d.active.run.Stop()
		d.finish(<-d.active.run.Done())
	}
	d.stopLanes()
	d.endGroups()
}

// endGroups stops a held group and waits until every group being stopped is gone.
func (d *driver) endGroups() {
	d.endHeld()
	d.ending.Wait()
}

func (d *driver) setWatch(e core.SetWatch) {
	// A delta applies to the set last handed on, when it was.
	e.Delta = e.Delta && d.watchedOK && (d.watchTo != nil || d.w != nil)
	if !e.Delta && slices.Equal(e.Paths, d.watched[0]) && slices.Equal(e.Trees, d.watched[1]) {
		return
	}
	d.makeReportFolders(e)
	d.watchedOK = false
	if !d.armWatch(e) {
		return
	}
	if d.m.Config().Persistent {
		d.rt.record(watchEntry(d.watched, e, e.Delta))
	}
	d.watched = [2][]string{e.Paths, e.Trees}
	d.watchedOK = true
	if !d.m.Config().Persistent && d.watchTo == nil {
		// A one-shot driver watches a path only once it waits for it (an
		// awaited output): one that came between the machine's look and now
		// sent no event, so the machine looks again, the watch armed.
		d.feed(core.FilesChanged{})
	}
}

// makeReportFolders makes the report folder of each step the new watch set
// names, where the plan takes reports, before it is watched: the worker's
// first report never races the folder's creation.
func (d *driver) makeReportFolders(e core.SetWatch) {
	st := d.m.State()
	if st == nil {
		return
	}
	named := e.Paths
	if e.Delta {
		named = e.Added
	}
	for _, p := range named {
		if id, ok := d.rt.WS.ReportsStep(p + "/"); ok && st.UsesReports(id) {
			_ = os.MkdirAll(d.rt.WS.ReportsDir(id), 0o755)
		}
	}
}

// armWatch hands the watch set on: to the sidecar's one watcher, which holds
// the union of its runs' sets, or to the driver's own, made the first time
// there is something to watch. False when nothing holds it.
func (d *driver) armWatch(e core.SetWatch) bool {
	var err error
	switch {
	case d.watchTo != nil:
		err = d.watchTo(e)
	case e.Delta:
		err = d.w.Adjust(e.Added, e.Removed)
	case d.w != nil:
		err = d.w.Update(e.Paths, e.Trees)
	case len(e.Paths) == 0 && len(e.Trees) == 0:
		return false
	default:
		cfg := d.wcfg
		cfg.Root, cfg.Paths, cfg.Trees = d.rt.WS.Dir, e.Paths, e.Trees
		w, err := watcher.New(cfg)
		if err != nil {
			d.rt.Logger.Error("watching", "err", err)
			return false
		}
		d.w = w
		return true
	}
	if err != nil {
		d.rt.Logger.Error("updating watches", "err", err)
		return false
	}
	return true
}

// watchEntry journals a new watch set: whole the first time, then what changed,
// so that a step launched in a plan of 2,000 named paths journals one or two.
// A delta says what changed itself; otherwise the lists are compared.
func watchEntry(was [2][]string, e core.SetWatch, delta bool) core.Entry {
	paths, trees := e.Paths, e.Trees
	if was[0] == nil && was[1] == nil {
		return core.Entry{Event: "watch", Detail: map[string]any{"paths": paths, "trees": trees}}
	}
	detail := map[string]any{"count": len(paths) + len(trees)}
	changes := map[string][]string{"added": e.Added, "removed": e.Removed}
	if !delta {
		changes = map[string][]string{
			"added": watcher.SortedDiff(paths, was[0]), "removed": watcher.SortedDiff(was[0], paths),
			"treesAdded": watcher.SortedDiff(trees, was[1]), "treesRemoved": watcher.SortedDiff(was[1], trees),
		}
	}
	for key, list := range changes {
		if len(list) > 0 {
			detail[key] = list
		}
	}
	return core.Entry{Event: "watch", Detail: detail}
}

func (d *driver) batches() <-chan watcher.Batch {
	if d.w == nil {
		return nil
	}
	return d.w.Batches()
}

func (d *driver) watchErrors() <-chan error {
	if d.w == nil {
		return nil
	}
	return d.w.Errors()
}

func (d *driver) closeWatcher() {
	if d.w != nil {
		if err := d.w.Close(); err != nil {
			d.rt.Logger.Warn("closing watcher", "err", err)
		}
		d.w = nil
	}
}

// waitInherited waits, without polling, for an agent a previous stepseq left: it
// takes the step's try lock, which the kernel grants once the agent and every
// child that inherited the lock are gone.
func (d *driver) waitInherited(step string) {
	if d.parallel() {
		d.waitInheritedLane(step) // others run meanwhile
		return
	}
	if d.inherited != nil || !d.m.Config().Persistent {
		return
	}
	ch := make(chan struct{})
	d.inherited = ch
	d.agentsMoved() // it runs for the step: counted until the loop hears it is gone
	path := proc.TryLockOf(d.rt.WS, step)
	d.rt.Logger.Info("an agent from before the restart is still running; waiting for it", "step", step, "lock", path)
	ctx, ws, hook := d.ctx, d.rt.WS, d.inheritedGone
	go func() {
		proc.WaitTry(ctx, ws, path)
		close(ch)
		if hook != nil {
			hook()
		}
	}()
}

// drainReports hands the machine every report waiting in step id's folder, oldest
// first. A file that is not a report is refused at once.
func (d *driver) drainReports(id string) {
	dir := d.rt.WS.ReportsDir(id)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !store.ReportFile(name) || !e.Type().IsRegular() {
			continue
		}
		path, rel := filepath.Join(dir, name), d.rt.WS.ReportsRel(id)+"/"+name
		// Through the workspace root, capped, never blocking: a report is any
		// agent's file.
		data, fi, err := store.ReadFileInfoIn(d.rt.Root(), rel, store.ReportCap)
		if err != nil {
			store.RefuseReportFile(path, []string{err.Error()})
			continue
		}
		if len(data) == 0 {
			// A file just made, its writer yet to write: judged when its content
			// comes (the write is an event), never refused as empty midway.
			continue
		}
		rep, err := planspec.ParseReport(bytes.NewReader(data), rel)
		if err != nil && growing(path, len(data)) {
			// Read while its writer was midway: what was read is not what is
			// meant. The write that made it grow is an event that drains the
			// folder again, and the whole file is judged then.
			continue
		}
		if err != nil {
			store.RefuseReportFile(path, []string{err.Error()})
			d.rt.record(core.Entry{Event: "report-refused", Step: id, Reason: err.Error(), Detail: map[string]any{"via": "file"}})
			continue
		}
		in := core.ReportIn{Step: id, Report: rep, Via: "file", Ref: path, Written: fi.ModTime()}
		if try, ok := store.ReportTry(name); ok {
			in.Try = try
		}
		d.feed(in)
	}
}

// growing reports whether the file at path has grown past the n bytes just read
// from it, or was replaced.
func growing(path string, n int) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Size() != int64(n)
}

func (d *driver) reportVerdict(v core.ReportVerdict) {
	if d.verdict != nil {
		d.verdict(v)
	}
	d.pullReported(v)
	if v.Ref == "" || !filepath.IsAbs(v.Ref) {
		return
	}
	// Taking the file away answers its sender; it is no activity, or a
	// report written a moment later would wait for a window to settle.
	d.expect(v.Ref)
	if v.Accepted {
		_ = os.Remove(v.Ref) // kept in stepRuns[id].reports and the journal
		return
	}
	d.expect(v.Ref + ".why")
	d.expect(v.Ref + ".rejected")
	store.RefuseReportFile(v.Ref, v.Reasons)
}

// The Probe, answered from the workspace.

func (d *driver) Conditions(st *planspec.State) (core.CondSet, error) {
	if c := d.ahead; c != nil && c.st == st {
		d.ahead = nil
		return c, nil // compiled for the watches armed ahead
	}
	c, err := d.rt.Conditions(st)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (d *driver) Missing(paths []string) []string {
	return proc.MissingIn(d.rt.Root(), paths)
}

func (d *driver) ModTime(rel string) (time.Time, bool) {
	fi, err := os.Stat(filepath.Join(d.rt.WS.Dir, filepath.FromSlash(rel)))
	if err != nil || fi.IsDir() {
		return time.Time{}, false
	}
	return fi.ModTime(), true
}

// FolderModTime is a folder's modification time (core.FolderTimes): when an
// entry last came or went.
func (d *driver) FolderModTime(rel string) (time.Time, bool) {
	return folderModTime(filepath.Join(d.rt.WS.Dir, filepath.FromSlash(rel)))
}

func (d *driver) Orphan(id string, try int, started string) core.TryState {
	return proc.ProbeTry(d.rt.WS, id, try, started)
}

func (d *driver) CanLaunch(st *planspec.State, id string) error {
	_, err := d.resolve(st, id)
	return err
}

func (d *driver) resolve(st *planspec.State, id string) (proc.Agent, error) {
	if st.IsPull(id) {
		if d.pull == nil {
			return proc.Agent{}, &core.ConfigError{Msg: fmt.Sprintf("step %s has agent: mcp: it is pulled by an MCP worker; run `stepseq watch` or `stepseq mcp` on this workspace, not %s", id, d.m.Config().Driver)}
		}
		return proc.Agent{Argv: []string{planspec.AgentMCP}, Source: "mcp"}, nil
	}
	if c := &d.agentFor; c.st == st && c.id == id && c.agent.Argv != nil {
		return c.agent, nil
	}
	a, err := d.rt.resolveAgent(st, id)
	if err != nil {
		return a, err
	}
	d.agentFor.st, d.agentFor.id, d.agentFor.agent = st, id, a
	return a, nil
}

func (d *driver) LastOutput() time.Time {
	if d.active == nil {
		return time.Time{}
	}
	return d.active.run.LastOutput()
}

// watchAhead sets the driver's watches from st, a state its machine has not
// read yet, as the machine will ask for them once it reads it (its plan's
// set, without a running try's report folders): watched before the read.
func (d *driver) watchAhead(st *planspec.State) {
	if st == nil || d.watchTo == nil {
		return
	}
	conds, err := d.rt.Conditions(st)
	if err != nil {
		return // the machine finds the error on its read
	}
	d.ahead = conds
	paths, trees := d.WatchSet(st, conds)
	if err := d.watchTo(core.SetWatch{Paths: slices.Compact(slices.Sorted(slices.Values(paths))), Trees: trees}); err != nil {
		d.rt.Logger.Warn("updating watches", "err", err)
	}
}

func (d *driver) WatchSet(st *planspec.State, conds core.CondSet) (paths, trees []string) {
	c, _ := conds.(*Conditions)
	return WatchSet(d.rt.WS, d.plansDir(), st, c)
}

func (d *driver) plansDir() string {
	if d.plans != "" {
		return d.plans
	}
	return filepath.Join(d.rt.WS.Dir, "plans")
}

func (d *driver) ReportsDir(id string) string { return d.rt.WS.ReportsRel(id) }

// ResultFile reads a step's result file (resultFrom: file:PATH) through the
// workspace root, with the result cap.
func (d *driver) ResultFile(rel string) ([]byte, error) {
	data, err := store.ReadFileIn(d.rt.Root(), rel, proc.ResultCap)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s does not exist: the agent wrote no result there", rel)
	}
	return data, err
}

// batch hands a watcher batch to the machine: reports first, then the change
// itself (awaited outputs, on: globs, gates).
func (d *driver) batch(b watcher.Batch) {
	var steps []string
	for _, p := range b.Paths {
		if id, ok := d.rt.WS.ReportsStep(p); ok && !slices.Contains(steps, id) {
			steps = append(steps, id)
		}
	}
	if b.Rescan && d.active != nil && !slices.Contains(steps, d.active.step) {
		steps = append(steps, d.active.step)
	}
	steps = d.rescanSteps(b, steps)
	for _, id := range steps {
		d.drainReports(id)
	}
	d.feed(core.FilesChanged{Paths: b.Paths, Rescan: b.Rescan})
}
