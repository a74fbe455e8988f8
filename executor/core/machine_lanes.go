package core

import (
	"log/slog"
	"slices"
	"time"

	"github.com/stepseq/stepseq/planspec"
)

// Lanes: in a state whose steps run side by side, each step instance in flight
// has a lane of its own, holding what the machine holds of the one try of a
// straight line (the try dispatched or running, its exit to judge, the outputs
// it awaits). The rules of a try are the straight line's, run with the lane's
// try in place (onLane): one try per instance, judged on its own.

// lane is one step instance's try in flight.
type lane struct {
	run       *tryRun
	pending   *tryExit
	awaiting  *tryExit
	inherited bool // an agent an earlier stepseq left runs it
}

func (l *lane) empty() bool {
	return l.run == nil && l.pending == nil && l.awaiting == nil && !l.inherited
}

// graph reports whether the held state's steps run side by side.
func (m *Machine) graph() bool { return m.st != nil && m.st.IsGraph() }

// onLane runs f with step id's lane in place of the machine's try, and keeps
// what f left there. Outside a graph, f runs as it is.
func (m *Machine) onLane(id string, f func()) {
	if m.lanes == nil && !m.graph() {
		f()
		return
	}
	if m.lanes == nil {
		m.lanes = map[string]*lane{}
	}
	l := m.lanes[id]
	if l == nil {
		l = &lane{}
	}
	saved := lane{run: m.run, pending: m.pending, awaiting: m.awaiting}
	m.run, m.pending, m.awaiting = l.run, l.pending, l.awaiting
	f()
	l.run, l.pending, l.awaiting = m.run, m.pending, m.awaiting
	m.run, m.pending, m.awaiting = saved.run, saved.pending, saved.awaiting
	if l.empty() {
		delete(m.lanes, id)
	} else {
		m.lanes[id] = l
	}
	if len(m.lanes) == 0 {
		m.lanes = nil
	}
}

// laneIDs are the steps with a lane, in queue order (then by id), so that
// what is done for each is done in the order of the plan.
func (m *Machine) laneIDs() []string {
	if len(m.lanes) == 0 {
		return nil
	}
	ids := make([]string, 0, len(m.lanes))
	for id := range m.lanes {
		ids = append(ids, id)
	}
	pos := map[string]int{}
	if m.st != nil {
		for i, id := range m.st.StepQueue {
			if m.lanes[id] != nil {
				pos[id] = i + 1
			}
		}
	}
	slices.SortFunc(ids, func(a, b string) int {
		if pos[a] != pos[b] {
			return pos[a] - pos[b]
		}
		if a < b {
			return -1
		}
		return 1
	})
	return ids
}

// eachLane runs f on every lane, in queue order.
func (m *Machine) eachLane(f func(id string)) {
	for _, id := range m.laneIDs() {
		m.onLane(id, func() { f(id) })
	}
}

// laneBusy reports whether step id has a try in flight.
func (m *Machine) laneBusy(id string) bool { return m.lanes[id] != nil }

// holdsLane reports whether a lane waits on the exited try of step at try.
func (m *Machine) holdsLane(step string, try int) bool {
	l := m.lanes[step]
	if l == nil {
		return false
	}
	for _, t := range []*tryExit{l.pending, l.awaiting} {
		if t != nil && t.step == step && t.try == try {
			return true
		}
	}
	return false
}

// Running are the step instances whose agent runs now (or is offered), in
// queue order: several in a graph, at most one in a straight line.
func (m *Machine) Running() []string {
	var out []string
	if r := m.run; r != nil && r.launched {
		out = append(out, r.step)
	}
	for _, id := range m.laneIDs() {
		if r := m.lanes[id].run; r != nil && r.launched {
			out = append(out, id)
		}
	}
	return out
}

// slots is how many more tries may launch: the plan's maxParallel less the
// tries in flight; a one-shot driver runs one at a time, as the original does.
func (m *Machine) slots() int {
	limit := m.st.Settings.MaxParallel
	if !m.cfg.Persistent {
		limit = 1
	}
	if limit <= 0 {
		return -1
	}
	used := 0
	for _, l := range m.lanes {
		if l.run != nil || l.pending != nil || l.awaiting != nil || l.inherited {
			used++
		}
	}
	return max(limit-used, 0)
}

// advanceGraph is advance for a graph: every step that may launch does, each
// in its lane; every step that waits or blocks is told once.
func (m *Machine) advanceGraph() {
	m.dropPastDelay()
	m.limitAt = time.Time{}
	m.approvalAt = time.Time{}
	if !m.canDecideGraph() {
		return
	}
	probes := tryProbes{}
	m.judgeOrphans(probes)
	alive := func(id string) bool { return m.cfg.Probe != nil && m.probeOnce(probes, id).Alive }
	f := Facts{Now: m.now, MaxRetries: m.cfg.MaxRetries, Alive: alive, Cond: m.cond, Skipped: m.skipped, Render: m.render,
		Loop: m.loopEvent}
	pass := ReconcileGraph(m.st, f, GraphFacts{Busy: m.laneBusy, Slots: m.slots(), Foreach: m.foreach})
	changed := pass.Changed
	if pass.Expanded {
		m.refreshConds()
	}
	changed = m.summarize(pass.Told) || changed
	changed = m.stampHeartbeat() || changed
	m.sayDecision(pass.Told)
	if changed {
		m.markDirty(pass.Told.Reason)
	}
	for _, d := range pass.Decisions {
		m.actGraph(d)
	}
	if m.decideAgain {
		// A gate timed out and was answered: decided again once this pass's
		// decisions are all acted on, so none is acted on twice.
		m.decideAgain = false
		m.advanceGraph()
		return
	}
	switch pass.Told.Action {
	case Idle:
		if !m.planDone {
			m.planDone = true
			m.notifyEvent("", 0, planspec.PhaseDone, EventPlanDone, "all "+countOf(len(m.st.StepQueue), "step")+" done", "none")
		}
	case Blocked:
		if m.toldBlocked != pass.Told.Step {
			m.toldBlocked = pass.Told.Step
			d := pass.Told
			m.notifyEvent("", 0, planspec.PhaseBlocked, EventPlanBlocked, "held by step "+d.Step+": "+d.Reason, "stepseq retry "+d.Step)
		}
	}
}

// actGraph does what one step's decision says.
func (m *Machine) actGraph(d Decision) {
	switch d.Action {
	case Launch:
		delete(m.toldSteps, d.Step) // it runs again: a new block is told anew
		m.onLane(d.Step, func() { m.dispatch(d) })
	case Delayed:
		if m.delayAt.IsZero() || d.At.Before(m.delayAt) {
			m.delayAt = d.At
		}
	case LimitWaiting:
		if m.limitAt.IsZero() || d.At.Before(m.limitAt) {
			m.limitAt = d.At
		}
	case Running:
		if d.Step == "" {
			return
		}
		if m.lanes == nil {
			m.lanes = map[string]*lane{}
		}
		if m.lanes[d.Step] == nil {
			m.lanes[d.Step] = &lane{}
		}
		m.lanes[d.Step].inherited = true
		m.emit(WaitInherited{Step: d.Step})
	case Blocked:
		m.blockedStep(d)
	case Merging:
		m.mergeAt(d)
	case AwaitingApproval:
		m.askInGraph(d)
	case OverBudget:
		m.overBudget(d)
	}
}

// askInGraph asks step d.Step's gate (or the plan's) while other steps may
// run; the timer goes to the gate that times out first.
func (m *Machine) askInGraph(d Decision) {
	at := m.approvalAt
	m.ask(d)
	if !at.IsZero() && (m.approvalAt.IsZero() || at.Before(m.approvalAt)) {
		m.approvalAt = at
	}
}

// blockedStep tells the user once that step d.Step is blocked: what needs it
// waits; the rest of the plan goes on.
func (m *Machine) blockedStep(d Decision) {
	if m.toldSteps == nil {
		m.toldSteps = map[string]bool{}
	}
	if m.toldSteps[d.Step] {
		return
	}
	m.toldSteps[d.Step] = true
	run := m.st.Run(d.Step)
	if run.Phase != planspec.PhaseBlocked {
		m.setPhase(d.Step, planspec.PhaseBlocked)
		m.notifyEvent(d.Step, run.Tries, planspec.PhaseBlocked, EventRetriesExhausted, d.Reason, "stepseq retry "+d.Step)
	}
}

// canDecideGraph is canDecide for a graph: tries in flight do not stop the
// others from launching.
func (m *Machine) canDecideGraph() bool {
	if m.st == nil || m.bad != nil || m.conds == nil && m.cfg.Probe != nil || m.stopping || m.inherited {
		return false
	}
	return m.writeErr == nil
}

// foreach evaluates foreach step id's list with what its conditions see.
func (m *Machine) foreach(id string) ([]any, error) {
	if f, ok := m.conds.(interface {
		Foreach(now time.Time, id string) ([]any, error)
	}); ok {
		return f.Foreach(m.now, id)
	}
	return (&graphPass{st: m.st, f: Facts{Now: m.now}}).items(id)
}

// refreshConds compiles the conditions again once the plan gained steps (a
// foreach's instances), and asks for their watches.
func (m *Machine) refreshConds() {
	if m.cfg.Probe == nil {
		return
	}
	conds, err := m.cfg.Probe.Conditions(m.st)
	if err != nil {
		m.log(slog.LevelError, "state file has invalid conditions; nothing runs until they are fixed", "err", err)
		m.conds = nil
		return
	}
	m.conds = conds
	m.planGen++
}

// judgeOrphans judges each try a graph's state holds IN_PROGRESS that no lane
// holds, as judgeOrphan does the cursor's.
func (m *Machine) judgeOrphans(probes tryProbes) {
	if m.cfg.Probe == nil {
		return
	}
	for _, id := range slices.Clone(m.st.StepQueue) {
		run := m.st.StepRuns[id]
		if run == nil || run.Status != planspec.StatusInProgress || m.lanes[id] != nil {
			continue
		}
		m.onLane(id, func() { m.judgeOrphanOf(probes, id) })
	}
}

// lanesStopped stops every lane's agent for why (a removed state file).
func (m *Machine) lanesStopped(why string) {
	m.eachLane(func(string) {
		if r := m.run; r != nil && r.launched && r.stopReason == "" {
			r.stopReason = why
			m.emit(StopAgent{Step: r.step, Try: r.try, Reason: why})
		}
		m.awaiting = nil
	})
}

// launchLanes launches, in queue order, every lane's try whose write is done.
func (m *Machine) launchLanes() {
	m.eachLane(func(string) { m.launchWritten() })
}

// lanesTimer adds each lane's awaited outputs' deadline and report timers.
func (m *Machine) lanesTimer(add func(time.Time)) {
	for _, l := range m.lanes {
		if l.awaiting != nil {
			add(l.awaiting.deadline)
		}
		if r := l.run; r != nil && r.launched && r.stopReason == "" {
			for _, t := range m.reportDeadlines(r) {
				add(t)
			}
		}
	}
}

// lanesTimerFired checks each lane's awaited outputs and report timers.
func (m *Machine) lanesTimerFired() {
	m.eachLane(func(string) {
		if m.awaiting != nil {
			m.checkAwaiting()
		}
		if r := m.run; r != nil && r.launched && r.stopReason == "" {
			m.reportTimers(r)
		}
	})
}

// lanesChanged checks each lane's awaited outputs after a change of files.
func (m *Machine) lanesChanged() {
	m.eachLane(func(string) {
		if m.awaiting != nil {
			m.checkAwaiting()
		}
	})
}

// lanesJudged judges each lane's exit once the state is read again.
func (m *Machine) lanesJudged() {
	m.eachLane(func(string) {
		if p := m.pending; p != nil && m.bad == nil {
			m.pending = nil
			m.judge(p)
		}
	})
}

// lanesShutdown stops every lane's agent; a try not launched yet is dropped.
func (m *Machine) lanesShutdown() {
	m.eachLane(func(string) {
		if r := m.run; r != nil {
			if !r.launched {
				m.run = nil
				return
			}
			m.emit(StopAgent{Step: r.step, Try: r.try, Reason: "shutdown"})
		}
	})
}

// lanesUnlaunched drops the lanes' tries whose launch waited for a write: the
// file says something else now.
func (m *Machine) lanesUnlaunched() {
	m.eachLane(func(string) { m.dropUnlaunched() })
}

// lanesInheritedGone forgets which lanes an earlier stepseq's agent held: the
// next decision asks each try lock again.
func (m *Machine) lanesInheritedGone() {
	for id, l := range m.lanes {
		l.inherited = false
		if l.empty() {
			delete(m.lanes, id)
		}
	}
}

// laneSteps are the steps whose try lanes hold, launched, for the watches.
func (m *Machine) laneSteps() []string {
	var out []string
	for _, id := range m.laneIDs() {
		if r := m.lanes[id].run; r != nil && r.launched {
			out = append(out, id)
		}
	}
	return out
}

// laneAwaited are the outputs lanes await, for a one-shot driver's watches.
func (m *Machine) laneAwaited() []string {
	var out []string
	for _, l := range m.lanes {
		if l.awaiting != nil && m.st != nil {
			if spec := m.st.Steps[l.awaiting.step]; spec != nil {
				out = append(out, spec.RequiredOutputs...)
			}
		}
	}
	return out
}

// StepOutputs is what a Probe answers when several agents run at once: when
// step id's agent last wrote a byte; zero when never.
type StepOutputs interface {
	LastOutputOf(id string) time.Time
}

// graphDone is what a step's verdict DONE decides in a graph, where no
// cursor passes it: its abort and exit, the end of its loop's round.
func (m *Machine) graphDone(id string) {
	f := Facts{Now: m.now, MaxRetries: m.cfg.MaxRetries, Cond: m.cond, Loop: m.loopEvent}
	if _, _, changed := afterDone(m.st, id, f); changed {
		m.markDirty("verdict")
	}
}

// applyRetries takes the queued retries while a graph's other steps run: a
// retry touches only its step. Re-runs wait until nothing is in flight.
func (m *Machine) applyRetries() {
	var rest []Trigger
	for _, t := range m.triggers {
		if !t.Retry {
			rest = append(rest, t)
			continue
		}
		if m.lanes[t.Step] != nil {
			rest = append(rest, t) // its agent is being stopped: taken once it is gone
			continue
		}
		m.retry(t.Step, t.From)
	}
	m.triggers = rest
}
