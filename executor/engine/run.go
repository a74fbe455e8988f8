package engine

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/watcher"
)

// Run is one run the sidecar drives: a state file, the machine and driver that
// own it, and its trigger folder's drain. Every run is taken the same way; the
// main run is only the one whose file is state.json, the one the plans dropped
// in plans/ go to.
type Run struct {
	name    string
	d       *driver
	closing bool // close asked: archived once its agent is gone
	// drain: a drain of the run's trigger folder is in flight; drainAgain: the
	// folder changed meanwhile, and is drained again once it is back.
	drain, drainAgain bool
}

func (r *Run) main() bool { return r.name == store.MainRun }

// runExit is the end of a run's agent, forwarded to the loop.
type runExit struct {
	r    *Run
	run  proc.Started
	exit core.Exit
}

// runDrained is what a drain of a run's trigger folder read.
type runDrained struct {
	r        *Run
	triggers []core.Trigger
	errs     []error
	atStart  bool // one of the start's drains, which ready waits for
}

// newRun makes the Run of run name, whose state file is sf, without reading
// it: its driver hands its watches to the union, its exits, timer and
// inherited agent's end to the loop's channels.
func (s *Sidecar) newRun(name string, sf *store.StateFile) *Run {
	rw, rt := s.WS.ForRun(name), s.Runtime
	if name != store.MainRun {
		rt = &Runtime{WS: rw, Getenv: s.Getenv, Environ: s.Environ, Grace: s.Grace, PipeGrace: s.PipeGrace,
			Logger: s.Logger.With("run", name), Journal: &store.Journal{Path: rw.JournalPath()}, Now: s.Now, Allow: s.Allow, ExposeEnv: s.ExposeEnv, Sandbox: s.Sandbox, root: s.Root()}
	}
	r := &Run{name: name}
	cfg := s.cfg
	cfg.TriggersDir = s.rel(rw.TriggersDir())
	d := newDriver(s.ctx, rt, sf, s.lock, cfg)
	d.timer = time.AfterFunc(time.Hour, func() {
		select {
		case s.runTimers <- r:
		case <-s.loopDone:
		}
	})
	d.timer.Stop()
	d.metrics, d.notifier, d.onChange = s.opt.Metrics, s.opt.Notifier, s.opt.OnChange
	d.plans = s.opt.PlansDir
	d.onDrain = func() { s.startDrain(r) }
	// A run's pulled steps are offered through its files (its state, reports
	// folder): the launcher dispatches them, and ends a try its done report ends.
	d.pull = NewPullLauncher(s.pullKey)
	if !r.main() {
		d.pull = NewPullLauncher(RunPullKey(s.pullKey, name))
	}
	s.runHooks(r, d)
	r.d = d
	s.runs[name] = r
	return r
}

// runHooks wires a run's driver to what the sidecar shares: the watch union,
// --max-agents and the loop's channels; the main run's, to the plans as well.
func (s *Sidecar) runHooks(r *Run, d *driver) {
	closeReq := s.rel(d.rt.WS.CloseRequestPath())
	var foreign []string // what the run's machine names that is the main run's alone
	if r.main() {
		d.onIntake = func() { s.intakeDue = true }
		d.onWritten = s.planWritten
		d.returnsConfigErr = s.opt.ExitWhenDone // Run returns CannotLaunch
	} else {
		foreign = []string{s.rel(s.opt.PlansDir)}
	}
	d.watchTo = func(w core.SetWatch) error {
		if w.Delta {
			return s.adjustFor(r.name, without(w.Added, foreign...), without(w.Removed, append(foreign, closeReq)...))
		}
		return s.watchFor(r.name, append(slices.Clone(without(w.Paths, foreign...)), closeReq), w.Trees)
	}
	d.admit = s.admit
	d.agentsChanged = s.countAgents
	d.sharedWatcher = func() *watcher.Watcher { return s.w }
	d.launched = func(run proc.Started) {
		go func() {
			e := <-run.Done()
			select {
			case s.runExits <- runExit{r: r, run: run, exit: e}:
			case <-s.loopDone:
			}
		}()
	}
	d.inheritedGone = func() {
		select {
		case s.runInherit <- r:
		case <-s.loopDone:
		}
	}
	// What a lane waits for off the loop (an inherited agent's end) comes
	// back as a call, taken only while the run is still driven.
	d.toLoop = func(f func()) {
		select {
		case s.calls <- func() {
			if s.runs[r.name] == r {
				f()
				s.after(r)
			}
		}:
		case <-s.loopDone:
		}
	}
}

// addRun starts driving run name: its machine reads its state file.
func (s *Sidecar) addRun(name string) {
	if len(s.unheldRuns([]string{name})) == 0 {
		return
	}
	s.takeUp(s.newRun(name, &store.StateFile{Path: store.RunStatePath(s.WS.Dir, name)}))
}

// takeUp has a run's machine read its state file and decide, then drains the
// triggers queued for it; a run asked to close is closed instead.
func (s *Sidecar) takeUp(r *Run) {
	rt := r.d.rt
	start := core.Entry{Event: "start", Detail: map[string]any{"pid": s.lock.Holder.PID, "state": rt.WS.State, "run": r.name}}
	if closeAsked(rt.WS) {
		rt.record(start)
		s.closeRun(r)
		return
	}
	// Its first records (start, the state read, the decision, its watches)
	// go to its journal as one write.
	rt.Journal.Hold()
	defer func() {
		if err := rt.Journal.Flush(); err != nil {
			rt.Logger.Warn("journal not written", "err", err)
		}
	}()
	rt.record(start)
	// The machine arms a run's watches, its close request's with them, before
	// the first write that offers a step, so a close made on seeing the offer
	// sends an event.
	r.d.readState()
	if s.runs[r.name] == r && !r.closing {
		r.d.feed(core.TriggersQueued{Now: true})
	}
	s.after(r)
}

func closeAsked(ws store.Workspace) bool {
	_, err := os.Lstat(ws.CloseRequestPath())
	return err == nil
}

// pass hands one watcher batch to the runs it concerns, the main run first,
// then the others in the order of their names, so that a burst is taken the
// same way each time. A run file that appears is a new run.
func (s *Sidecar) pass(b watcher.Batch) {
	s.Logger.Debug("pass", "paths", b.Paths, "rescan", b.Rescan)
	s.opt.Metrics.pass()
	s.took()
	var taken map[*Run]bool
	if b.Rescan {
		taken = s.discoverRuns()
	}
	for _, p := range b.Paths {
		if strings.Contains(p, "/") {
			continue
		}
		if name := store.RunOfStateFile(p); name != "" && s.runs[name] == nil {
			if _, err := os.Lstat(store.RunStatePath(s.WS.Dir, name)); err == nil {
				s.addRun(name)
			}
		}
	}
	per := map[*Run][]string{}
	for _, p := range b.Paths {
		for _, name := range s.union.ownersOf(p) {
			if r := s.runs[name]; r != nil {
				per[r] = append(per[r], p)
			}
		}
	}
	if b.Rescan {
		for _, r := range s.runs {
			if _, ok := per[r]; !ok && !taken[r] {
				per[r] = nil
			}
		}
	}
	order := make([]*Run, 0, len(per))
	for r := range per {
		order = append(order, r)
	}
	slices.SortFunc(order, func(a, b *Run) int {
		if a.main() != b.main() {
			if a.main() {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	for _, r := range order {
		s.passRun(r, watcher.Batch{Paths: per[r], Rescan: b.Rescan})
	}
}

// changes is what a batch says of a run's own files.
type changes struct{ state, plans, triggers, close bool }

// changesOf reads a batch for the run's state file, close request, triggers
// and (the main run's) plans.
func (s *Sidecar) changesOf(r *Run, b watcher.Batch) changes {
	ws := r.d.rt.WS
	state, closeReq, triggers := s.rel(ws.State), s.rel(ws.CloseRequestPath()), s.rel(ws.TriggersDir())
	plans := ""
	if r.main() {
		plans = s.rel(s.opt.PlansDir)
	}
	c := changes{state: b.Rescan, plans: b.Rescan && r.main(), triggers: b.Rescan, close: b.Rescan}
	for _, p := range b.Paths {
		switch {
		case p == state:
			c.state = true
		case p == closeReq:
			c.close = true
		case plans != "" && under(p, plans):
			c.plans = true
		case under(p, triggers):
			c.triggers = true
		}
	}
	c.close = c.close && closeAsked(ws)
	return c
}

// passRun takes one batch for one run: its close request, its state file, the
// plans (the main run's), its triggers, then the change itself.
func (s *Sidecar) passRun(r *Run, b watcher.Batch) {
	if s.runs[r.name] != r || r.closing {
		return
	}
	d := r.d
	if len(b.Paths) > 0 && d.lastGate.IsZero() && d.active == nil {
		d.lastGate = time.Now().Add(-s.opt.Settle)
	}
	c := s.changesOf(r, b)
	if c.close {
		s.closeRun(r)
		if !r.main() {
			return
		}
	}
	if c.state {
		d.readState()
	}
	if c.plans {
		s.intakePlans()
	}
	if c.triggers {
		s.triggersChanged(r)
	}
	if len(b.Paths) > 0 || b.Rescan {
		d.batch(b)
	}
	s.after(r)
	if d.active == nil {
		d.lastGate = time.Time{}
	}
}

// after follows every input a run took: the main run takes in the plans
// waiting once its own is over, another run whose state file is gone with
// nothing in flight is dropped.
func (s *Sidecar) after(r *Run) {
	if r.main() {
		s.afterPlan()
		return
	}
	if s.runs[r.name] != r {
		return
	}
	m := r.d.m
	_ = m.TakeRemoved() // a run file removed by hand: nothing to keep beyond its journal
	if m.State() == nil && m.StateInvalid() == nil && !m.Busy() && !r.d.running() && r.d.waiting == nil {
		if _, err := os.Lstat(r.d.sf.Path); errors.Is(err, fs.ErrNotExist) {
			s.dropRun(r)
		}
	}
}

// afterPlan lets the next plan waiting in the folder start once one is over.
func (s *Sidecar) afterPlan() {
	m := s.main.d.m
	if st := m.TakeRemoved(); st != nil {
		s.keepRemoved(st)
	}
	if s.intakeDue {
		s.intakeDue = false
		s.intakePlans()
	}
	// With no state file (removed, or never written), a plan waits for nothing
	// but a try of the removed run still in flight.
	if m.Done() || m.State() == nil && m.Err() == nil && !m.Busy() {
		s.intakePlans()
	}
}

// timerFired takes a run's timer.
func (s *Sidecar) timerFired(r *Run) {
	if s.runs[r.name] == r {
		r.d.feed(core.TimerFired{})
		s.after(r)
	}
}

// inheritedGone takes the end of an agent an earlier stepseq left to a run.
func (s *Sidecar) inheritedGone(r *Run) {
	if s.runs[r.name] == r {
		r.d.inherited = nil
		r.d.agentsMoved() // counted gone before its verdict is written
		r.d.feed(core.InheritedGone{})
	}
}

// runExited takes the end of a run's agent.
func (s *Sidecar) runExited(ev runExit) {
	r := ev.r
	if s.runs[r.name] != r || !r.d.finishRun(ev.run, ev.exit) {
		return
	}
	if r.closing && !r.d.running() {
		s.archiveClosed(r)
		return
	}
	s.after(r)
}

// triggersChanged tells a run's machine its trigger folder changed, with the
// folder's time: the machine's quiet window (re)starts.
func (s *Sidecar) triggersChanged(r *Run) {
	in := core.TriggersQueued{}
	if mod, ok := folderModTime(r.d.rt.WS.TriggersDir()); ok {
		in.Modified = mod
	}
	r.d.feed(in)
}

// folderModTime is a folder's modification time: when an entry last came or went.
func folderModTime(path string) (time.Time, bool) {
	fi, err := os.Stat(path)
	if err != nil || !fi.IsDir() {
		return time.Time{}, false
	}
	return fi.ModTime(), true
}

// startDrain reads and removes a run's queued triggers off the loop: ten
// thousand files are I/O the loop must not wait on.
func (s *Sidecar) startDrain(r *Run) {
	if r.drain {
		r.drainAgain = true
		return
	}
	r.drain = true
	s.draining++
	if s.starting {
		s.startDrains++
	}
	out := runDrained{r: r, atStart: s.starting}
	ws := r.d.rt.WS
	go func() {
		out.triggers, out.errs = DrainTriggers(ws)
		select {
		case s.drains <- out:
		case <-s.loopDone:
		}
	}()
}

// drained hands a run's machine what a drain read, as one input.
func (s *Sidecar) drained(x runDrained) {
	r := x.r
	r.drain = false
	s.draining--
	if x.atStart {
		s.startDrains--
		if s.startDrains == 0 && s.starting {
			s.nowReady()
		}
	}
	for _, err := range x.errs {
		r.d.rt.Logger.Warn("ignored a trigger", "err", err)
	}
	if s.runs[r.name] != r || r.closing {
		return // the run is gone: its requests with it
	}
	if len(x.triggers) > 0 {
		r.d.feed(core.TriggersIn{Triggers: x.triggers})
	}
	if r.drainAgain {
		r.drainAgain = false
		s.startDrain(r)
	}
	s.after(r)
}

// nowReady ends the start: every run is taken up and the triggers queued
// before it are drained.
func (s *Sidecar) nowReady() {
	s.starting = false
	if s.opt.OnReady != nil {
		s.opt.OnReady()
	}
	s.ready.Store(true)
	s.record(core.Entry{Event: "ready", Detail: map[string]any{"watches": s.w.Stats().Watches}})
}

// requeue puts back triggers a drain took from a run's folder that no machine
// will act on, each distinct request once: the next stepseq takes them.
func (s *Sidecar) requeue(ws store.Workspace, ts []core.Trigger) {
	seen := map[core.Trigger]bool{}
	for _, t := range ts {
		t.At = ""
		if seen[t] {
			continue
		}
		seen[t] = true
		if err := WriteTrigger(ws, t); err != nil {
			s.Logger.Warn("trigger lost at stop", "step", t.Step, "err", err)
		}
	}
}

// dropRun stops driving a run: its watches go, its timer stops.
func (s *Sidecar) dropRun(r *Run) {
	r.d.timer.Stop()
	r.d.endGroups()
	if err := s.watchFor(r.name, nil, nil); err != nil {
		s.Logger.Warn("updating watches", "err", err)
	}
	s.waiting = slices.DeleteFunc(s.waiting, func(d *driver) bool { return d == r.d })
	delete(s.runs, r.name)
	_ = r.d.rt.Journal.Close()
}

// closeRun carries out a close request (CloseRun): the run stops launching,
// its agent is stopped as at shutdown, and once it is gone the run is
// archived. The main run goes on: only its state goes to the history.
func (s *Sidecar) closeRun(r *Run) {
	if r.main() {
		s.closeMain()
		return
	}
	if r.closing {
		return
	}
	r.closing = true
	r.d.rt.Logger.Info("closing the run")
	r.d.feed(core.Shutdown{})
	r.d.waiting, r.d.laneWait = nil, nil
	if r.d.stopTries() > 0 {
		return // archived once the last exit comes
	}
	s.archiveClosed(r)
}

// archiveClosed archives a closed run whose agent is gone, and drops it.
func (s *Sidecar) archiveClosed(r *Run) {
	r.d.endGroups()
	r.d.sweepWorktrees(nil)
	switch err := r.d.rt.WS.ArchiveClosed(); {
	case errors.Is(err, fs.ErrNotExist):
		// Its state file was removed by hand: nothing to archive, and the
		// request is answered (CloseRun waits for it to go).
		_ = os.Remove(r.d.rt.WS.CloseRequestPath())
	case err != nil:
		r.d.rt.Logger.Error("the closed run could not be archived", "err", err)
	}
	s.dropRun(r)
}

// closeMain closes the main run: its state goes to the history and state.json
// is removed; its agent, if one runs, is stopped. The machine then reads the
// state gone, and a plan waiting in plans/ may start.
func (s *Sidecar) closeMain() {
	d := s.main.d
	if _, err := os.Lstat(s.WS.State); err != nil {
		_ = os.Remove(s.WS.CloseRequestPath())
		return
	}
	s.Logger.Info("closing the workspace's own run")
	d.stopTries()
	d.sweepWorktrees(nil)
	if err := s.WS.ArchiveClosed(); err != nil {
		s.Logger.Error("the closed run could not be archived", "err", err)
		return
	}
	d.readState()
	_ = d.m.TakeRemoved() // archived already: the history holds it once
}

// shutdown stops launching, ends every run's agent (SIGTERM, then SIGKILL
// after the grace period) and records the interruption. A step stays
// IN_PROGRESS: the next start retries it without spending a try.
func (s *Sidecar) shutdown() error {
	s.Logger.Info("stopping")
	s.record(core.Entry{Event: "stopping", Reason: "signal or context end"})
	s.stopRuns()
	s.record(core.Entry{Event: "stop"})
	return nil
}

// stopRuns ends every run's agent at shutdown and waits for them, then hands
// each machine, stopped, the triggers a drain in flight took: it applies them
// without launching, as a stepseq with no sidecar does.
func (s *Sidecar) stopRuns() {
	live := 0
	for _, r := range s.runs {
		r.d.feed(core.Shutdown{})
		r.d.waiting, r.d.laneWait = nil, nil
		live += r.d.stopTries()
	}
	var late []runDrained
	for live > 0 || s.draining > 0 {
		select {
		case ev := <-s.runExits:
			if s.runs[ev.r.name] == ev.r && ev.r.d.finishRun(ev.run, ev.exit) { // stopped: no fallback to another agent
				live--
			}
		case x := <-s.drains:
			s.draining--
			x.r.drain = false
			late = append(late, x)
		}
	}
	for _, x := range late {
		switch {
		case s.runs[x.r.name] != x.r || x.r.closing || len(x.triggers) == 0:
		case x.r.d.m.Busy():
			s.requeue(x.r.d.rt.WS, x.triggers)
		default:
			x.r.d.feed(core.TriggersIn{Triggers: x.triggers})
		}
	}
	for _, r := range s.runs {
		r.d.timer.Stop()
		r.d.endGroups()
		if !r.main() {
			_ = r.d.rt.Journal.Close()
		}
	}
}

// close ends the loop: calls are refused, the triggers of a drain still in
// flight are put back, the watcher stops and the workspace lock is let go.
func (s *Sidecar) close() {
	s.alive.Store(false)
	s.endCalls()
	for _, r := range s.runs {
		r.d.timer.Stop()
	}
	for s.draining > 0 {
		x := <-s.drains
		s.draining--
		s.requeue(x.r.d.rt.WS, x.triggers)
	}
	if s.w != nil {
		if err := s.w.Close(); err != nil {
			s.Logger.Warn("closing watcher", "err", err)
		}
		s.w = nil
	}
	close(s.loopDone)
	s.Lock = nil
	_ = s.lock.Unlock()
}

// took counts an input the loop takes, and marks the loop busy until its turn ends.
func (s *Sidecar) took() {
	s.passes.Add(1)
	s.hb.Busy(time.Now())
}

func (s *Sidecar) batches() <-chan watcher.Batch {
	if s.w == nil {
		return nil
	}
	return s.w.Batches()
}

func (s *Sidecar) watchErrors() <-chan error {
	if s.w == nil {
		return nil
	}
	return s.w.Errors()
}
