package engine

import (
	"slices"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/watcher"
)

// Agents side by side: a persistent driver of a plan whose steps run as a
// graph holds each step instance's running try in a lane of its own, its exit
// handed to the loop (toLoop); a one-shot driver, and a straight line, hold
// one try at a time in active, as always.

// driverLanes is the driver's part that holds several tries at once.
type driverLanes struct {
	lanes    map[string]*activeTry // running tries by step instance
	laneHeld map[string]*activeTry // exited tries whose group is left while their outputs are awaited
	laneEnds map[*activeTry]*laneEnd
	// toLoop, when set, runs f on the loop (the sidecar's calls): how a lane's
	// exit and an inherited agent's end reach the loop.
	toLoop func(f func())
	// laneWait are the tries held back by --max-agents behind waiting, in the
	// order they came.
	laneWait []core.StartAgent
	// laneInherit are the steps whose inherited agent is waited for.
	laneInherit map[string]bool
}

// laneEnd is a lane's agent's end, once its waiter has it: done is closed then.
type laneEnd struct {
	done chan struct{}
	exit core.Exit
}

// parallel reports whether the driver runs its plan's steps side by side.
func (d *driver) parallel() bool {
	st := d.m.State()
	return d.m.Config().Persistent && st != nil && st.IsGraph()
}

// keepActive holds a try just launched: in its lane, its exit forwarded, when
// the plan runs side by side; else as the one active try.
func (d *driver) keepActive(a *activeTry) {
	defer d.agentsMoved()
	if !d.parallel() {
		d.active = a
		return
	}
	if d.lanes == nil {
		d.lanes = map[string]*activeTry{}
		d.laneHeld = map[string]*activeTry{}
	}
	d.lanes[a.step] = a
	if d.launched != nil || d.toLoop == nil {
		return // the sidecar forwards a run's exits itself
	}
	if d.laneEnds == nil {
		d.laneEnds = map[*activeTry]*laneEnd{}
	}
	end := &laneEnd{done: make(chan struct{})}
	d.laneEnds[a] = end
	toLoop := d.toLoop
	go func() {
		end.exit = <-a.run.Done()
		close(end.done)
		toLoop(func() { d.laneExited(a, end) })
	}()
}

// laneExited takes the end of lane a's agent, unless it was taken already.
func (d *driver) laneExited(a *activeTry, end *laneEnd) {
	if d.lanes[a.step] != a {
		return
	}
	delete(d.laneEnds, a)
	d.finishTry(a, end.exit)
}

// tryOf is the try whose agent is run: the active one or a lane's.
func (d *driver) tryOf(run proc.Started) *activeTry {
	if a := d.active; a != nil && a.run == run {
		return a
	}
	for _, a := range d.lanes {
		if a.run == run {
			return a
		}
	}
	return nil
}

// tryFor is step's running try at try, nil when none runs.
func (d *driver) tryFor(step string, try int) *activeTry {
	if a := d.active; a != nil && a.step == step && a.try == try {
		return a
	}
	if a := d.lanes[step]; a != nil && a.try == try {
		return a
	}
	return nil
}

// finishRun takes the end of run's agent; false when no try of the driver's
// has that agent (it was taken already).
func (d *driver) finishRun(run proc.Started, exit core.Exit) bool {
	a := d.tryOf(run)
	if a == nil {
		return false
	}
	d.finishTry(a, exit)
	return true
}

// dropActive forgets a try whose agent exited, and names in the workspace
// lock another that still runs.
func (d *driver) dropActive(a *activeTry) {
	defer d.agentsMoved()
	if d.active == a {
		d.active = nil
	}
	if d.lanes[a.step] == a {
		delete(d.lanes, a.step)
	}
	if d.lock == nil {
		return
	}
	var next *store.AgentHandle
	for _, o := range d.lanes {
		if pid, ticks := o.run.Ident(); pid > 0 {
			next = &store.AgentHandle{Step: o.step, Try: o.try, PID: pid, StartTicks: ticks}
			break
		}
	}
	d.lock.SetAgent(next)
}

// hold keeps an exited try's group while the machine awaits its outputs.
func (d *driver) hold(a *activeTry) {
	if d.lanes == nil || d.laneHeld == nil || !d.parallel() {
		d.endHeld()
		d.held = a
		return
	}
	if prev := d.laneHeld[a.step]; prev != nil {
		d.endGroup(prev)
	}
	d.laneHeld[a.step] = a
}

// releaseLanesHeld stops the groups of exited tries the machine no longer
// waits on.
func (d *driver) releaseLanesHeld() {
	for step, a := range d.laneHeld {
		if !d.m.Holds(a.step, a.try) {
			delete(d.laneHeld, step)
			d.endGroup(a)
		}
	}
}

// endGroup stops a held group away from the event loop.
func (d *driver) endGroup(a *activeTry) {
	d.ending.Add(1)
	go func() {
		defer d.ending.Done()
		a.run.EndGroup()
	}()
}

// stopLanes stops every lane's agent at shutdown and waits for each.
func (d *driver) stopLanes() {
	for _, a := range d.lanes {
		a.stopped = true
		a.run.Stop()
	}
	for a, end := range d.laneEnds {
		<-end.done
		d.laneExited(a, end)
	}
	for step, a := range d.laneHeld {
		delete(d.laneHeld, step)
		d.endGroup(a)
	}
}

// running reports whether a try of the driver's runs: the active one or a lane's.
func (d *driver) running() bool { return d.active != nil || len(d.lanes) > 0 }

// stopTries stops every try of the driver's that runs, the active one and each
// lane's, and counts them: their exits come back as any exit does.
func (d *driver) stopTries() int {
	n := 0
	stop := func(a *activeTry) {
		if !a.stopped {
			a.stopped = true
			a.run.Stop()
		}
		n++
	}
	if d.active != nil {
		stop(d.active)
	}
	for _, a := range d.lanes {
		stop(a)
	}
	return n
}

// agentsMoved tells the sidecar that an agent of the driver started or ended.
func (d *driver) agentsMoved() {
	if d.agentsChanged != nil {
		d.agentsChanged()
	}
}

// inheritedAgents counts the agents an earlier stepseq left that the driver
// waits for: they run for its steps as its own would, and count as its own do
// against --max-agents and in the running-agents gauge.
func (d *driver) inheritedAgents() int {
	n := len(d.laneInherit)
	if d.inherited != nil {
		n++
	}
	return n
}

// liveLanes counts the lanes' agent processes (a pulled try is none).
func (d *driver) liveLanes() int {
	n := 0
	for _, a := range d.lanes {
		if a.tryLock != nil {
			n++
		}
	}
	return n
}

// queueWaiting holds a try back behind --max-agents.
func (d *driver) queueWaiting(l core.StartAgent) {
	if d.waiting == nil {
		d.waiting = &l
		return
	}
	d.laneWait = append(d.laneWait, l)
}

// journalWaiting journals each try held back, with why.
func (d *driver) journalWaiting(why string) {
	held := d.laneWait
	if d.waiting != nil {
		held = append([]core.StartAgent{*d.waiting}, held...)
	}
	for _, l := range held {
		d.rt.record(core.Entry{Event: "launch-queued", Step: l.Step, Try: l.Try, Reason: why})
	}
}

// takeWaiting is the next try held back, nil when none is.
func (d *driver) takeWaiting() *core.StartAgent {
	l := d.waiting
	d.waiting = nil
	if len(d.laneWait) > 0 {
		next := d.laneWait[0]
		d.laneWait = d.laneWait[1:]
		if l == nil {
			return &next
		}
		d.waiting = &next
	}
	return l
}

// unqueue drops a try held back that the machine stopped; true when it was one.
func (d *driver) unqueue(step string, try int) bool {
	if w := d.waiting; w != nil && w.Step == step && w.Try == try {
		d.waiting = nil
		if len(d.laneWait) > 0 {
			d.waiting, d.laneWait = &d.laneWait[0], d.laneWait[1:]
		}
		return true
	}
	for i, l := range d.laneWait {
		if l.Step == step && l.Try == try {
			d.laneWait = append(d.laneWait[:i:i], d.laneWait[i+1:]...)
			return true
		}
	}
	return false
}

// waitInheritedLane waits, off the loop, for the agent an earlier stepseq
// left for step, in a graph where others run meanwhile; once it is gone the
// loop feeds the machine InheritedGone.
func (d *driver) waitInheritedLane(step string) {
	if d.laneInherit[step] {
		return
	}
	if d.laneInherit == nil {
		d.laneInherit = map[string]bool{}
	}
	d.laneInherit[step] = true
	d.agentsMoved() // it runs for the step: counted until the loop hears it is gone
	path := proc.TryLockOf(d.rt.WS, step)
	d.rt.Logger.Info("an agent from before the restart is still running; waiting for it", "step", step, "lock", path)
	ctx, ws, hook, toLoop := d.ctx, d.rt.WS, d.inheritedGone, d.toLoop
	go func() {
		proc.WaitTry(ctx, ws, path)
		switch {
		case toLoop != nil:
			toLoop(func() { d.inheritedLaneGone(step) })
		case hook != nil:
			hook()
		}
	}()
}

// inheritedLaneGone takes the end of an inherited agent's wait.
func (d *driver) inheritedLaneGone(step string) {
	delete(d.laneInherit, step)
	d.agentsMoved()
	d.feed(core.InheritedGone{})
}

// LastOutputOf is when step id's agent last wrote a byte (core.StepOutputs).
func (d *driver) LastOutputOf(id string) time.Time {
	if a := d.active; a != nil && a.step == id {
		return a.run.LastOutput()
	}
	if a := d.lanes[id]; a != nil {
		return a.run.LastOutput()
	}
	return time.Time{}
}

// rescanSteps are the steps whose report folders a rescan drains: those of
// the tries running.
func (d *driver) rescanSteps(b watcher.Batch, steps []string) []string {
	if !b.Rescan {
		return steps
	}
	for id := range d.lanes {
		if !slices.Contains(steps, id) {
			steps = append(steps, id)
		}
	}
	return steps
}
