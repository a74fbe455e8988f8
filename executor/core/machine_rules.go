package core

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/stepseq/stepseq/planspec"
	"github.com/stepseq/stepseq/planspec/plan"
)

// stateRead takes the file as read. A file that does not parse (a writer midway, a
// broken edit) keeps the last good state and is read again after a short backoff;
// it is never overwritten.
func (m *Machine) stateRead(in StateRead) {
	switch {
	case in.Unchanged:
		// The echo of this process's own write, or the file put back as it was.
		if m.bad != nil {
			m.log(slog.LevelInfo, "state file is valid again")
		}
		m.bad, m.badAt, m.badTries = nil, time.Time{}, 0
	case errors.Is(in.Err, fs.ErrNotExist):
		if m.st != nil {
			// The run is gone with its file: its agent is stopped and its
			// verdict dropped. The driver keeps the last state held (Removed).
			m.removed = m.st
			m.log(slog.LevelWarn, "state file removed: its run is gone", "plan", m.st.Settings.Name)
			m.journal(Entry{Event: "state-removed", Reason: "state.json removed: its run is gone"})
			if r := m.run; r != nil && r.launched && r.stopReason == "" {
				r.stopReason = "state.json removed: its run is gone"
				m.emit(StopAgent{Step: r.step, Try: r.try, Reason: r.stopReason})
			}
			m.lanesStopped("state.json removed: its run is gone")
		}
		m.awaiting = nil
		m.st, m.conds, m.bad, m.badAt, m.badTries = nil, nil, nil, time.Time{}, 0
		m.dirty = false
		m.dropUnlaunched()
	case in.Err != nil:
		m.bad = in.Err
		m.badTries++
		if m.badTries <= stateReread {
			m.badAt = m.now.Add(time.Duration(5<<m.badTries) * time.Millisecond)
			m.log(slog.LevelDebug, "state file does not parse; reading it again shortly", "try", m.badTries, "err", in.Err)
			return
		}
		m.badAt = time.Time{}
		if m.badTries == stateReread+1 {
			m.log(slog.LevelError, "state file is not valid; the last good state is kept and the file is not overwritten", "err", in.Err)
			m.journal(Entry{Event: "state-invalid", Reason: in.Err.Error()})
		}
		return
	default:
		if m.bad != nil {
			m.log(slog.LevelInfo, "state file is valid again")
		}
		m.bad, m.badAt, m.badTries = nil, time.Time{}, 0
		m.dropUnlaunched()
		m.lanesUnlaunched()
		m.adopt(in.State)
		m.dirty = false // the file is what we hold now
		m.journal(Entry{Event: "state-read", Detail: map[string]any{"status": in.State.Status, "cursor": in.State.CurrentStep}})
		m.clampFuture()
	}
	if p := m.pending; p != nil && m.bad == nil {
		m.pending = nil
		m.judge(p)
	}
	m.lanesJudged()
}

// planApplied adopts a plan's new state, to be written: the file on disk still
// holds what it replaces until the write is done.
func (m *Machine) planApplied(in PlanApplied) {
	if m.bad != nil {
		m.log(slog.LevelInfo, "a plan replaces the state file that did not parse", "file", in.Source)
	}
	m.bad, m.badAt, m.badTries = nil, time.Time{}, 0
	m.dropUnlaunched()
	m.lanesUnlaunched()
	m.adopt(in.State)
	m.clampFuture()
	m.markDirty("plan applied: " + in.Source)
}

// dropUnlaunched forgets a try marked in memory whose launch waited for a write,
// and the gates' requests that waited for one: the file now says something
// else, and the core decides again from it.
func (m *Machine) dropUnlaunched() {
	if m.run != nil && !m.run.launched {
		m.run = nil
	}
	m.tellAfterWrite = nil
}

// adopt makes st the state and compiles its conditions. A state whose expressions
// do not compile is kept but runs nothing until fixed.
func (m *Machine) adopt(st *planspec.State) {
	st.Track() // the core replaces a spec, never edits one in place, and changes runs through Run
	m.st = st
	m.conds = nil
	m.planGen++
	m.planDone = st.Status == planspec.StatusDone
	m.toldBlocked = ""
	if st.CurrentStep < len(st.StepQueue) {
		id := st.StepQueue[st.CurrentStep]
		if run := st.StepRuns[id]; run != nil && run.Status == planspec.StatusFailed && run.Phase == planspec.PhaseBlocked {
			m.toldBlocked = id
		}
	}
	if m.cfg.Probe == nil {
		return
	}
	conds, err := m.cfg.Probe.Conditions(st)
	if err != nil {
		m.log(slog.LevelError, "state file has invalid conditions; nothing runs until they are fixed", "err", err)
		m.journal(Entry{Event: "state-invalid", Reason: err.Error()})
		return
	}
	m.conds = conds
}

// planEdited takes a valid edit of the running plan for the steps not started.
func (m *Machine) planEdited(in PlanEdited) {
	if m.st == nil || m.bad != nil {
		return
	}
	MergePlan(m.st, in.Plan, in.Hash)
	m.adopt(m.st)
	m.markDirty("plan edited: steps not started take the new definition")
	m.log(slog.LevelInfo, "plan edit applied to the steps not started", "file", m.st.Settings.Source)
}

// filesChanged re-checks awaited outputs, and between agents re-runs the first
// finished step whose on: globs match a person's change.
func (m *Machine) filesChanged(in FilesChanged) {
	if m.awaiting != nil {
		m.checkAwaiting()
	}
	m.lanesChanged()
	if m.st == nil || m.bad != nil || m.Busy() || len(in.Paths) == 0 {
		return
	}
	m.changed = appendChanged(m.changed, in.Paths)
	if id, matched := OnMatches(m.st, in.Paths, m.notAgentWork); id != "" {
		m.onHandled = m.now
		// The re-run is told the files whose change matched its globs, not the
		// folders, the state file or other files of the same batch.
		m.changed = appendChanged(nil, matched)
		m.rerun(id, "on: "+matched[0]+" changed", 1)
	}
}

// startedBy are the changed paths that can have started step id's run, as its
// agent is told them (STEPSEQ_CHANGED): those its when or skip reads, those its
// on: globs match, and the trigger folder. Other files changed meanwhile are
// left out, unless its conditions build a path at run time.
func (m *Machine) startedBy(id string) []string {
	if len(m.changed) == 0 || m.conds == nil {
		return m.changed
	}
	paths, globs, known := m.conds.Reads(id)
	if !known {
		return m.changed
	}
	var on []string
	if spec := m.st.Steps[id]; spec != nil {
		on = spec.On
	}
	var out []string
	for _, p := range m.changed {
		if p == MetaDir+"/triggers" || namedBy(p, paths) || slices.ContainsFunc(globs, func(g string) bool { return planspec.MatchGlob(g, p) }) ||
			slices.ContainsFunc(on, func(g string) bool { return planspec.MatchGlob(g, p) }) {
			out = append(out, p)
		}
	}
	return out
}

// namedBy reports whether p is one of paths or lies in a folder among them.
func namedBy(p string, paths []string) bool {
	for _, q := range paths {
		if p == q || strings.HasPrefix(p, q+"/") {
			return true
		}
	}
	return false
}

// appendChanged keeps the paths that start the next run, at most 100.
func appendChanged(list, paths []string) []string {
	for _, p := range paths {
		if len(list) >= 100 {
			break
		}
		if !slices.Contains(list, p) && !strings.HasPrefix(p, MetaDir+"/") {
			list = append(list, p)
		}
	}
	return list
}

// MtimeSlack covers file times taken from the kernel's coarse clock, which lags
// the wall clock by up to a scheduler tick.
const MtimeSlack = 20 * time.Millisecond

// notAgentWork reports whether a changed path is a person's change: not made by an
// agent and not acted on by an earlier pass. A file last modified while an agent
// ran is that agent's work and triggers nothing, however late its event arrives.
func (m *Machine) notAgentWork(p string) bool {
	if strings.HasPrefix(p, MetaDir+"/worktrees/") {
		return false // a worktree is an agent's folder, never a person's change
	}
	mod, ok := m.cfg.Probe.ModTime(p)
	if !ok || !mod.After(m.onHandled) {
		return false
	}
	for _, r := range m.agentRuns {
		if !mod.Before(r[0].Add(-MtimeSlack)) && !mod.After(r[1].Add(MtimeSlack)) {
			return false
		}
	}
	return true
}

// applyTriggers takes the queued triggers between agents. A burst is one change:
// retries first, then one re-run from the earliest step named, one journal record
// and one write.
func (m *Machine) applyTriggers() {
	if len(m.triggers) == 0 {
		return
	}
	m.triggers = m.notApplied(m.triggers)
	b := CoalesceTriggers(m.st, m.triggers)
	for _, t := range m.triggers {
		if t.Budget != "" {
			m.raiseBudget(t)
		}
	}
	m.noteApplied(m.triggers)
	m.triggers = nil
	m.answers(b.Answers)
	for _, t := range b.Retries {
		m.retry(t.Step, t.From)
	}
	for _, id := range b.Unknown {
		m.log(slog.LevelWarn, "trigger ignored", "step", id, "err", NoStep(m.st, id).Error())
	}
	if b.Rerun == "" {
		return
	}
	if len(m.changed) < 100 && !slices.Contains(m.changed, MetaDir+"/triggers") {
		m.changed = append(m.changed, MetaDir+"/triggers")
	}
	reason := "trigger"
	if b.Count > 1 {
		reason = fmt.Sprintf("%d triggers", b.Count)
	}
	m.rerun(b.Rerun, reason, b.Count)
}

func (m *Machine) rerun(id, reason string, count int) {
	if err := Rerun(m.st, id); err != nil {
		m.log(slog.LevelWarn, "trigger ignored", "step", id, "err", err)
		return
	}
	m.planDone = false
	m.journal(Entry{Event: "trigger", Step: id, Reason: reason, Detail: map[string]any{"count": count}})
	m.log(slog.LevelInfo, "re-running step and the ones after it", "step", id, "reason", reason)
	m.markDirty(reason)
}

// retry is `stepseq retry STEP`: a new try of a blocked or failed step, whose prompt
// carries the blocker's next.
func (m *Machine) retry(id, from string) {
	if err := Retry(m.st, id, RetryLimit(m.st, id, m.cfg.MaxRetries)); err != nil {
		m.log(slog.LevelWarn, "retry refused", "step", id, "err", err)
		m.journal(Entry{Event: "retry-refused", Step: id, Reason: err.Error()})
		return
	}
	m.planDone = false
	m.journal(Entry{Event: "retry", Step: id, Reason: "retry from " + from})
	m.log(slog.LevelInfo, "retrying step", "step", id)
	m.markDirty("retry")
}

// advance lets the core decide, and acts on the decision until it must wait.
func (m *Machine) advance() {
	if m.graph() {
		m.advanceGraph()
		return
	}
	m.dropPastDelay()
	m.limitAt = time.Time{} // the decision below sets it again while the wait holds
	m.approvalAt = time.Time{}
	if !m.canDecide() {
		return
	}
	d, changed, ok := m.decide()
	if !ok {
		return
	}
	changed = m.summarize(d) || changed
	changed = m.renderAtCursor(d) || changed
	changed = m.stampHeartbeat() || changed
	m.sayDecision(d)
	if changed {
		m.markDirty(d.Reason)
	}
	m.act(d)
}

// canDecide says whether a decision may be taken now: a good state is held,
// its conditions can be asked, nothing is in flight, inherited or stopping,
// and the file on disk records what the machine holds (no try runs that it
// does not record).
func (m *Machine) canDecide() bool {
	if m.st == nil || m.bad != nil || m.conds == nil && m.cfg.Probe != nil || m.Busy() || m.stopping || m.inherited {
		return false
	}
	return m.writeErr == nil
}

// decide is the core's decision: the runner's when it is forced, else
// Reconcile's. ok is false when there is none to act on: a forced try whose
// template failed, or an orphan's try judged instead.
func (m *Machine) decide() (d Decision, changed, ok bool) {
	if m.force {
		if d, ok, changed = runnerDecision(m.st, m.now, m.render); !ok {
			m.force = false
			if changed {
				m.markDirty("runner: a template failed: " + *m.st.Run(m.st.StepQueue[m.st.CurrentStep]).Error)
			}
			return d, changed, false
		}
		return d, changed, true
	}
	probes := tryProbes{}
	if m.judgeOrphan(probes) {
		return Decision{}, false, false
	}
	alive := func(id string) bool { return m.cfg.Probe != nil && m.probeOnce(probes, id).Alive }
	d, changed = Reconcile(m.st, Facts{Now: m.now, MaxRetries: m.cfg.MaxRetries, Alive: alive, Cond: m.cond, Skipped: m.skipped, Render: m.render,
		Loop: m.loopEvent})
	return d, changed, true
}

// stampHeartbeat sets lastHeartbeatIso when the config asks, as the
// original's every check does: the first decision is written whatever it is;
// later ones go with the next write. It reports whether that needs a write.
func (m *Machine) stampHeartbeat() bool {
	if !m.cfg.StampHeartbeat {
		return false
	}
	m.st.LastHeartbeatIso = planspec.FormatISO(m.now)
	changed := !m.stamped
	m.stamped = true
	return changed
}

// sayDecision journals a decision that differs from the last one told (and
// every launch), and logs why a step waits when that is new.
func (m *Machine) sayDecision(d Decision) {
	same := d.Action == m.told.Action && d.Step == m.told.Step && d.Reason == m.told.Reason
	if !same || d.Action == Launch {
		m.journal(Entry{Event: "decide", Step: d.Step, Reason: d.Reason, Detail: map[string]any{"action": d.Action.String(), "driver": m.cfg.Driver}})
	}
	if d.Action != Launch && d.Action != Idle && !same {
		level := slog.LevelInfo
		if d.Action == Blocked {
			level = slog.LevelWarn
		}
		m.log(level, "step waits", "step", d.Step, "why", d.Reason)
	}
	m.told = d
}

// act does what the decision says: launch, set the delay or limit timer,
// wait on an inherited agent, tell of a block or of the plan done.
func (m *Machine) act(d Decision) {
	switch d.Action {
	case Launch:
		m.dispatch(d)
	case Delayed:
		m.delayAt = d.At
	case LimitWaiting:
		m.limitAt = d.At
	case Running:
		m.inherited = true
		m.emit(WaitInherited{Step: d.Step})
	case Blocked:
		m.blocked(d)
	case AwaitingApproval:
		m.ask(d)
	case OverBudget:
		m.overBudget(d)
	case Idle:
		if !m.planDone {
			m.planDone = true
			m.notifyEvent("", 0, planspec.PhaseDone, EventPlanDone, "all "+countOf(len(m.st.StepQueue), "step")+" done", "none")
		}
	}
}

// blocked tells the user once that step d.Step holds the plan: the step's own
// blocked when its retries are spent (a worker's blocked report told its own),
// then the plan's. The state remembers what was told: a blocked phase on disk
// was told by the stepseq that wrote it, so a later check or sidecar start on
// the same blocked plan says nothing (one transition, one report).
func (m *Machine) blocked(d Decision) {
	if m.toldBlocked == d.Step {
		return
	}
	m.toldBlocked = d.Step
	run := m.st.Run(d.Step)
	if run.Phase != planspec.PhaseBlocked {
		m.setPhase(d.Step, planspec.PhaseBlocked)
		m.notifyEvent(d.Step, run.Tries, planspec.PhaseBlocked, EventRetriesExhausted, d.Reason, "stepseq retry "+d.Step)
	}
	m.notifyEvent("", 0, planspec.PhaseBlocked, EventPlanBlocked, "held by step "+d.Step+": "+d.Reason, "stepseq retry "+d.Step)
}

// dropPastDelay drops a delay that the coming decision recomputes.
func (m *Machine) dropPastDelay() {
	if !m.delayAt.IsZero() && !m.now.Before(m.delayAt) {
		m.delayAt = time.Time{}
	}
}

func (m *Machine) cond(id, kind string) (bool, error) {
	if m.conds == nil {
		return StateCond(m.st, m.now, id, kind)
	}
	return m.conds.Cond(m.now, id, kind)
}

// StateCond evaluates step id's exit or abort with what st knows, without a
// workspace: for a machine with no Probe, and a face that has no workspace at
// hand. When and skip hold as unset.
func StateCond(st *planspec.State, now time.Time, id, kind string) (bool, error) {
	spec := st.Steps[id]
	if spec == nil || kind != plan.CondExit && kind != plan.CondAbort {
		return kind == plan.CondWhen, nil
	}
	src := spec.Exit
	if kind == plan.CondAbort {
		src = spec.Abort
	}
	if src == "" {
		return false, nil
	}
	c, err := plan.CompileCondition(src)
	if err != nil {
		return false, err
	}
	return c.Eval(stateEnv(st, now, id))
}

// stateEnv is what step id's conditions and templates read of st as of now,
// without a workspace: the runs, vars, params, the loop around the step and
// the running totals. id "" is the run's own, as the summary reads it.
func stateEnv(st *planspec.State, now time.Time, id string) *plan.Env {
	return &plan.Env{Now: now, Runs: st.StepRuns, Step: id, Vars: st.Settings.Vars,
		Params: st.Settings.Params, Loop: st.LoopAround(id), Totals: st.Totals()}
}

// loopEvent journals a round's start or a loop's end, and tells the user.
func (m *Machine) loopEvent(ev LoopEvent) {
	detail := map[string]any{"round": ev.Round, "max": ev.Max}
	if ev.Group != "" {
		detail["group"] = ev.Group
	}
	if ev.How != "" {
		detail["how"] = ev.How
	}
	m.journal(Entry{Event: ev.Kind, Step: ev.Step, Reason: ev.Reason, Detail: detail})
	m.log(slog.LevelInfo, ev.Reason, "step", ev.Step)
	if ev.Kind == LoopRound {
		if ev.Round > 1 {
			m.notifyEvent(ev.Step, 0, planspec.PhasePlanned, "round", ev.Reason, "step "+ev.Step)
		}
		return
	}
	if ev.How != planspec.LoopMax || m.st.Group(ev.Group) != nil && m.st.Group(ev.Group).OnMax == planspec.OnMaxDone {
		m.notifyEvent(ev.Step, 0, planspec.PhaseDone, "loop-exit", ev.Reason, m.afterLoop(ev))
	}
}

// afterLoop is what comes after a loop left by ev: the step after the group.
func (m *Machine) afterLoop(ev LoopEvent) string {
	if ev.How == planspec.LoopAbort {
		return "stepseq retry " + ev.Step
	}
	if g := m.st.Group(ev.Group); g != nil && len(g.Steps) > 0 {
		return m.nextStep(g.Steps[len(g.Steps)-1])
	}
	return "none"
}

// summarize keeps what the plan's summary gives once the plan ends, done or
// blocked, and forgets it when a step launches again. It reports whether the
// state changed.
func (m *Machine) summarize(d Decision) bool {
	st := m.st
	if len(st.Settings.Summary) == 0 {
		return false
	}
	ended := d.Action == Blocked || d.Action == Idle && st.Status == planspec.StatusDone
	switch {
	case d.Action == Launch && st.Settings.SummaryValues != nil:
		st.Settings.SummaryValues = nil
		return true
	case !ended || st.Settings.SummaryValues != nil:
		return false
	}
	if s, ok := m.conds.(interface {
		Summary(now time.Time, summary map[string]string) map[string]any
	}); ok {
		st.Settings.SummaryValues = s.Summary(m.now, st.Settings.Summary)
	} else {
		st.Settings.SummaryValues = plan.EvalSummary(st.Settings.Summary, stateEnv(st, m.now, ""))
	}
	return true
}

// render renders step id's templates when its try starts, with what its
// conditions see; without a workspace (no Probe), with the state alone.
func (m *Machine) render(id string) (*planspec.StepSpec, error) {
	if r, ok := m.conds.(interface {
		Render(now time.Time, id string) (*planspec.StepSpec, error)
	}); ok {
		return r.Render(m.now, id)
	}
	return plan.RenderSpec(m.st.Steps[id], m.st.Settings.Agent, stateEnv(m.st, m.now, id))
}

// launchRefusal says why step id's agent cannot start (a configuration error):
// the world refuses it, or it would run unsandboxed where a sandbox is required.
func (m *Machine) launchRefusal(id string) error {
	if m.cfg.Probe != nil {
		if err := m.cfg.Probe.CanLaunch(m.st, id); err != nil {
			return err
		}
	}
	return SandboxRefusal(m.st, id, m.cfg.Sandbox)
}

// dispatch marks the try in the state and asks for the write that records it; the
// launch follows that write (written), never precedes it.
func (m *Machine) dispatch(d Decision) {
	m.delayAt = time.Time{}
	if err := m.launchRefusal(d.Step); err != nil {
		if m.configErr == nil || m.configErr.Error() != err.Error() {
			m.emit(Log{Level: slog.LevelError, Msg: "cannot launch the agent", Args: []any{"step", d.Step, "err", err}, ConfigErr: true})
			m.journal(Entry{Event: "config-error", Step: d.Step, Reason: err.Error()})
		}
		m.configErr = err
		return
	}
	m.configErr = nil
	m.toldBlocked = ""
	if m.force {
		m.forced = d.Step
		m.force = false
	}
	prev, ran := m.st.StepRuns[d.Step]
	// An interrupted try, or one a usage limit held, runs again under its own
	// number: its output goes on in the same log.
	resumed := ran && prev.Tries > 0 && (d.Interrupted || d.Reoffer) || ran && prev.Phase == planspec.PhaseWaiting
	resume := m.resumes(d.Step)
	var waited time.Duration
	if ran {
		waited = pendingWait(prev, m.now)
	}
	var try int
	if d.Reoffer {
		try = ReofferTry(m.st, d.Step, m.now)
	} else {
		try = BeginTry(m.st, d.Step, m.now, d.Interrupted)
	}
	m.spendTry(d.Step, !resumed && !d.Interrupted, waited)
	m.run = &tryRun{step: d.Step, try: try, prompt: d.Prompt, dispatched: m.now, changed: m.startedBy(d.Step), resumed: resumed, resume: resume,
		sandbox: SandboxOf(m.st, d.Step, m.cfg.Sandbox).Clone()}
	m.changed = nil
	m.progress = true
	m.markDirty("launch")
}

// agentExited takes an agent's end: the state is read again first, since the agent
// may have edited it; the try is judged once it parses.
func (m *Machine) agentExited(in AgentExited) {
	r := m.run
	if r == nil || r.step != in.Step || r.try != in.Try {
		return
	}
	m.run = nil
	m.lastEnded = r.step
	m.agentRuns = append(m.agentRuns, [2]time.Time{in.Exit.Started, in.Exit.Ended})
	if len(m.agentRuns) > 32 {
		m.agentRuns = m.agentRuns[1:]
	}
	if m.stopping && m.st.IsPull(r.step) {
		// No process of a pulled try ran here: it is offered again on the next start.
		m.journal(Entry{Event: "withdrawn", Step: r.step, Try: r.try, Reason: "stepseq stopped; the pulled try is offered again on the next start, under its own number"})
		return
	}
	if m.stopping {
		m.journal(Entry{Event: "interrupted", Step: r.step, Try: r.try, Reason: "stepseq stopped; the step is retried on the next start"})
		m.log(slog.LevelWarn, "agent stopped by shutdown; the step will be retried", "step", r.step, "try", r.try)
		return
	}
	m.pending = &tryExit{step: r.step, try: r.try, exit: in.Exit, stop: r.stopReason, done: r.doneReport, agentFailed: in.AgentFailed,
		limits: in.Limits, session: in.Session, result: in.Result, resultErr: in.ResultErr, refused: in.Refused,
		usage: in.Usage, usageErr: in.UsageErr, agent: in.Agent}
	if r.blockedBy == "report" {
		m.pending.blocked = workerBlocker(m.st, r.step)
	}
	m.emit(ReadState{})
}

// judge takes a finished try on the current state. An exit 0 with outputs still
// missing waits for them when the step sets awaitOutputs.
func (m *Machine) judge(t *tryExit) {
	if m.st == nil {
		m.journal(Entry{Event: "dropped", Step: t.step, Try: t.try, Reason: "state.json removed while it ran"})
		return
	}
	spec := m.st.Steps[t.step]
	if spec == nil {
		m.log(slog.LevelWarn, "step removed from the plan while it ran; result dropped", "step", t.step)
		m.journal(Entry{Event: "dropped", Step: t.step, Try: t.try, Reason: "step removed from the plan while it ran"})
		return
	}
	m.keepSession(t)
	if m.holdForLimit(t) {
		m.recordUsage(t, true)
		return
	}
	exit := t.exit
	if t.stop == "" && exit.Code == 0 && !exit.TimedOut && exit.Err == nil && spec.AwaitOutputs > 0 &&
		len(m.missing(t.step, spec.RequiredOutputs)) > 0 {
		t.deadline = exit.Ended.Add(time.Duration(spec.AwaitOutputs))
		m.awaiting = t
		m.log(slog.LevelInfo, "agent exited; waiting for its outputs", "step", t.step, "until", t.deadline.Format(time.RFC3339))
		return
	}
	m.conclude(t)
}

func (m *Machine) checkAwaiting() {
	aw := m.awaiting
	if m.st == nil || m.st.Steps[aw.step] == nil {
		m.awaiting = nil
		return
	}
	if len(m.missing(aw.step, m.st.Steps[aw.step].RequiredOutputs)) == 0 || !m.now.Before(aw.deadline) {
		m.awaiting = nil
		m.conclude(aw)
	}
}

// conclude records the verdict of a finished try.
func (m *Machine) conclude(t *tryExit) {
	m.liftLimit(t)
	m.recordUsage(t, false)
	v := m.verdict(t)
	Record(m.st, t.step, t.exit, v, m.now)
	run := m.st.Run(t.step)
	if t.blocked == "" {
		// A report timer's blocker was about a running agent that went silent;
		// with the agent gone, its cause is gone. A worker's blocked report holds.
		clearReportBlockers(m.st, t.step)
		if run.Phase == planspec.PhaseBlocked {
			run.Phase = planspec.PhasePlanned
		}
	}
	switch {
	case v.OK:
		run.Phase = planspec.PhaseDone
		keepResult(run, t)
	case run.Phase == planspec.PhaseBlocked && t.stop == "":
		// A worker's blocked report holds the step until someone retries it.
	default:
		run.Phase = planspec.PhasePlanned
	}
	m.progress = true
	if v.OK && m.graph() {
		m.graphDone(t.step)
	}
	if v.OK && m.inWorktree(t.step) {
		m.commitVerified(t.step, run.Tries)
	}
	if t.step == m.forced {
		m.forced = ""
		m.forceFail = !v.OK
	}
	detail := map[string]any{"ok": v.OK}
	if !t.exit.Started.IsZero() && !t.exit.Ended.Before(t.exit.Started) {
		// How long the try's agent ran, for stepseq_step_duration_seconds.
		detail["seconds"] = t.exit.Ended.Sub(t.exit.Started).Seconds()
	}
	if !v.OK {
		detail["error"] = v.Error
	}
	m.journal(Entry{Event: "verdict", Step: t.step, Try: run.Tries, Detail: detail})
	if v.OK {
		m.log(slog.LevelInfo, "step done", "step", t.step, "try", run.Tries)
		m.notify(t.step, run.Tries, "stepseq", planspec.PhaseDone, "verified: outputs and checks hold", m.nextStep(t.step))
	} else {
		m.log(slog.LevelWarn, "step failed", "step", t.step, "try", run.Tries, "error", FirstChars(v.Error, 120))
		m.notifyEvent(t.step, run.Tries, planspec.ReportMilestone, EventTryFailed, FirstChars(v.Error, ErrorChars), "retry by the usual rules")
	}
	m.markDirty("verdict")
}

func (m *Machine) nextStep(id string) string {
	if m.graph() {
		if next := Dependents(m.st, id); len(next) > 0 {
			return "step " + strings.Join(next, ", ")
		}
		return "none"
	}
	if g, at := m.st.GroupOf(id); g != nil && at == len(g.Steps)-1 {
		// The end of a round: the next one, unless an exit or max ends the loop.
		if l := m.st.Loop(g.ID); l != nil && l.Ended == "" && l.Round < l.Max {
			return fmt.Sprintf("round %d/%d: step %s", l.Round+1, l.Max, g.Steps[0])
		}
	}
	i := slices.Index(m.st.StepQueue, id)
	if i >= 0 && i+1 < len(m.st.StepQueue) {
		return "step " + m.st.StepQueue[i+1]
	}
	return "none"
}

// verdict judges a try: how it ended, then stepseq's own verification:
// required outputs, the report's artifacts, the step's check. Every failed check
// is named, so that the troubleshoot prompt names them all.
func (m *Machine) verdict(t *tryExit) Verdict {
	exit := t.exit
	spec := m.st.Steps[t.step]
	if t.stop != "" {
		return Verdict{Error: t.stop}
	}
	if t.blocked != "" {
		return Verdict{Error: t.blocked}
	}
	if v, ended := JudgeExit(t.agentFailed, exit); ended {
		return v
	}
	if m.st.ReportsMode(t.step) == planspec.ReportsRequired && !t.done {
		return Verdict{Error: "exited 0 without a done report (reports: required): report done with its evidence before exiting"}
	}
	var reasons []string
	missing := m.missing(t.step, spec.RequiredOutputs)
	if len(missing) > 0 {
		reasons = append(reasons, "Missing required outputs: "+strings.Join(missing, ", "))
	}
	if t.done {
		if arts := lastDoneArtifacts(m.st.Run(t.step), t.try); len(arts) > 0 {
			if gone := m.missing(t.step, arts); len(gone) > 0 {
				reasons = append(reasons, "Missing reported artifacts: "+strings.Join(gone, ", "))
			}
		}
	}
	if len(reasons) == 0 && m.conds != nil {
		if v := checkVerdict(spec, m.conds.Check(m.now, t.step)); !v.OK {
			reasons = append(reasons, v.Error)
		}
	}
	if len(reasons) == 0 {
		reasons = append(reasons, m.resultVerdict(t)...)
	}
	if len(reasons) > 0 {
		if t.refused != "" {
			reasons = append(reasons, t.refused)
		}
		return Verdict{Error: strings.Join(reasons, "; "), MissingOutputs: missing}
	}
	return Verdict{OK: true}
}

func lastDoneArtifacts(run *planspec.StepRun, try int) []string {
	for i := len(run.Reports) - 1; i >= 0; i-- {
		if r := run.Reports[i]; r.Try == try && r.Status == planspec.ReportDone {
			return r.Artifacts
		}
	}
	return nil
}

func (m *Machine) setPhase(id, phase string) {
	run := m.st.Run(id)
	if run.Phase != phase {
		run.Phase = phase
		m.markDirty("phase " + phase)
	}
}

// OnMatches returns the first finished step whose `on` globs match one of paths
// that keep accepts, and that path: the step a change re-runs, with the steps after
// it. It returns "" when none does.
func OnMatches(st *planspec.State, paths []string, keep func(path string) bool) (string, []string) {
	for _, id := range st.StepQueue[:min(st.CurrentStep+1, len(st.StepQueue))] {
		spec := st.Steps[id]
		if spec == nil || len(spec.On) == 0 {
			continue
		}
		if run, ok := st.StepRuns[id]; !ok || run.Status != planspec.StatusDone {
			continue
		}
		var matched []string
		for _, g := range spec.On {
			lit := literalPrefix(g)
			for _, p := range paths {
				if !strings.HasPrefix(p, lit) {
					continue // cheaper than a match, and most paths differ early
				}
				if planspec.MatchGlob(g, p) && keep(p) && !slices.Contains(matched, p) {
					matched = append(matched, p)
				}
			}
		}
		if len(matched) > 0 {
			return id, matched
		}
	}
	return "", nil
}

// literalPrefix is a glob's part before its first pattern character: every match
// starts with it.
func literalPrefix(glob string) string {
	if i := strings.IndexAny(glob, "*?[{\\"); i >= 0 {
		return glob[:i]
	}
	return glob
}

// skipped tells the user of a step the core marked DONE by its skip: a step's end
// like any other, never silent.
func (m *Machine) skipped(id string) {
	why := "skipped: its skip condition holds"
	if sp := m.st.Steps[id]; sp != nil && sp.Skip != "" {
		why = "skipped: skip: " + sp.Skip + " is true"
	}
	m.journal(Entry{Event: "skipped", Step: id, Reason: why})
	m.notifyEvent(id, m.st.Run(id).Tries, planspec.PhaseDone, EventSkipped, why, m.nextStep(id))
}

// countOf is n and the noun, plural unless n is 1: "1 step", "3 steps".
func countOf(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// renderAtCursor renders, once, the templates of the step the cursor reached
// and that does not launch now (a gate, a delay, a limit holds it), as soon as
// its inputs are known: the original runner resuming the run at that point
// sends plain text. A template that cannot render yet is left to the try,
// which fails with the reason.
func (m *Machine) renderAtCursor(d Decision) bool {
	st := m.st
	if d.Action == Launch || st.CurrentStep >= len(st.StepQueue) {
		return false
	}
	id := st.StepQueue[st.CurrentStep]
	spec, tries := st.Steps[id], 0
	if run := st.StepRuns[id]; run != nil {
		if run.Status != planspec.StatusPending {
			return false
		}
		tries = run.Tries
	}
	key := fmt.Sprintf("%s#%d", id, tries)
	if spec == nil || m.cursorRendered == key || !hasTemplates(st, spec) {
		return false
	}
	m.cursorRendered = key
	rendered, err := m.render(id)
	if err != nil || rendered.Title == spec.Title && rendered.Instruction == spec.Instruction {
		return false
	}
	st.ReplaceSpec(id, rendered)
	return true
}
