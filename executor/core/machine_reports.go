package core

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/stepseq/stepseq/planspec"
)

// The workflow protocol: a worker's reports move its try through the
// phases, each move needing its evidence; timers stand in for reports that do not
// come.

// transitions are the phases each report status may come in, and where it leads.
var transitions = map[string]struct {
	from []string
	to   string
}{
	planspec.ReportAccepted:  {[]string{planspec.PhaseDispatching, planspec.PhaseBlocked}, planspec.PhaseInProgress},
	planspec.ReportMilestone: {[]string{planspec.PhaseInProgress, planspec.PhaseBlocked}, planspec.PhaseInProgress},
	planspec.ReportBlocked:   {[]string{planspec.PhaseDispatching, planspec.PhaseInProgress}, planspec.PhaseBlocked},
	// A done while dispatching stands for accepted and done: its evidence, the
	// final artifact, is stronger than an accept's first action (take tells both).
	planspec.ReportDone: {[]string{planspec.PhaseDispatching, planspec.PhaseInProgress, planspec.PhaseBlocked}, planspec.PhaseReviewing},
}

// reportSlack covers file times from the kernel's coarse clock.
const reportSlack = 20 * time.Millisecond

// report judges a worker's report and, when it is accepted, moves the try.
func (m *Machine) report(in ReportIn) {
	rep := in.Report
	run, reasons := m.admit(in)
	// A done report without a result, for a step whose result comes from
	// elsewhere (resultFrom), leaves the result to the verdict.
	if len(reasons) == 0 && rep.Status == planspec.ReportDone && (len(rep.Result) > 0 || !hasResultFrom(m.st, in.Step)) {
		if bad := m.resultProblems(in.Step, rep); len(bad) > 0 {
			m.invalidResult(m.run, in, bad)
			return
		}
	}
	if len(reasons) > 0 {
		m.journal(Entry{Event: "report-refused", Step: in.Step, Try: in.Try, Reason: strings.Join(reasons, "; "), Detail: map[string]any{"via": in.Via}})
		m.log(slog.LevelWarn, "report refused", "step", in.Step, "status", rep.Status, "reasons", strings.Join(reasons, "; "))
		m.emit(ReportVerdict{Ref: in.Ref, Step: in.Step, Reasons: reasons})
		return
	}
	m.take(in, run)
}

// admit is every reason the machine refuses the report, and the run record of
// the try it is for: AdmitReport against the try that runs, a report written
// before that try started, a done report's artifacts not in the workspace.
func (m *Machine) admit(in ReportIn) (run *planspec.StepRun, reasons []string) {
	rep := in.Report
	r := m.run
	if m.st == nil || m.bad != nil {
		return nil, append(rep.Problems(), "no valid state: nothing is running")
	}
	running := 0
	if r != nil && r.step == in.Step && r.launched {
		running = r.try
	}
	reasons = AdmitReport(m.st, in.Step, in.Try, running, rep)
	switch {
	case running == 0 || in.Try != 0 && in.Try != running || m.st.Steps[in.Step] == nil:
		return nil, reasons
	case in.Try == 0 && !in.Written.IsZero() && in.Written.Before(r.dispatched.Add(-reportSlack)):
		return nil, append(reasons, fmt.Sprintf("stale: written before try %d of step %s started", r.try, in.Step))
	}
	run = m.st.Run(in.Step) // the running try's: its evidence is checked too
	if rep.Status == planspec.ReportDone && len(rep.Artifacts) > 0 && m.cfg.Probe != nil {
		if gone := m.missing(in.Step, rep.Artifacts); len(gone) > 0 {
			reasons = append(reasons, "artifacts not found in the workspace: "+strings.Join(gone, ", "))
		}
	}
	return run, reasons
}

// take records an accepted report and moves the try's phase: the state records
// it before its sender hears it was taken, and the user is told.
func (m *Machine) take(in ReportIn, run *planspec.StepRun) {
	rep, r := in.Report, m.run
	from := run.Phase
	to := transitions[rep.Status].to
	run.Reports = append(run.Reports, planspec.ReportRecord{Time: planspec.FormatISO(m.now), Try: r.try, Via: in.Via, WorkerReport: rep})
	if len(run.Reports) > planspec.MaxReportsKept {
		run.Reports = slices.Delete(run.Reports, 0, len(run.Reports)-planspec.MaxReportsKept)
	}
	run.Phase = to
	r.lastReport = m.now
	if from == planspec.PhaseBlocked && rep.Status != planspec.ReportBlocked {
		clearReportBlockers(m.st, in.Step)
		r.blockedBy = ""
	}
	switch rep.Status {
	case planspec.ReportBlocked:
		r.blockedBy = "report"
		addBlocker(m.st, fmt.Sprintf("%s: blocked: %s (next: %s)", in.Step, oneLine(rep.Summary), oneLine(rep.Next)))
	case planspec.ReportDone:
		r.doneReport = true
	}
	m.markDirty("report " + rep.Status)
	if from == planspec.PhaseDispatching && rep.Status == planspec.ReportDone {
		m.impliedAccept(in, r.try)
	}
	m.journal(Entry{Event: "report", Step: in.Step, Try: r.try, Reason: rep.Status, Detail: map[string]any{
		"via": in.Via, "summary": rep.Summary, "evidence": rep.Evidence, "risk": rep.Risk, "next": rep.Next, "phase": to}})
	m.log(slog.LevelInfo, "report", "step", in.Step, "try", r.try, "status", rep.Status, "phase", to, "summary", FirstChars(rep.Summary, 120))
	// The state records the report before its sender hears it was taken: the
	// sender's next report is checked against the file.
	m.flush()
	m.emit(ReportVerdict{Ref: in.Ref, Step: in.Step, Accepted: true})
	switch rep.Status {
	case planspec.ReportAccepted:
		m.notify(in.Step, r.try, "worker", planspec.PhaseInProgress, rep.Summary+" — "+rep.Evidence, rep.Next)
	case planspec.ReportDone:
		// The worker's claim: the user hears done once, after verification.
		m.notifyWorker(in.Step, r.try, planspec.PhaseInProgress, EventReviewing, "says done: "+rep.Summary+" — "+rep.Evidence, "stepseq verifies the outputs and the result")
	default:
		m.notify(in.Step, r.try, "worker", rep.Status, rep.Summary+" — "+rep.Evidence, rep.Next)
	}
}

// impliedAccept records the accept a done while dispatching stands for: the
// journal says it was implied, and the user hears the step in progress before
// it is reviewed.
func (m *Machine) impliedAccept(in ReportIn, try int) {
	m.journal(Entry{Event: "report", Step: in.Step, Try: try, Reason: planspec.ReportAccepted, Detail: map[string]any{
		"via": in.Via, "implied": "by a done while dispatching", "phase": planspec.PhaseInProgress}})
	m.notifyWorker(in.Step, try, planspec.PhaseInProgress, EventAcceptImplied, "accepted (implied by its done): "+in.Report.Summary, "stepseq verifies the outputs and the result")
}

// notifyWorker tells a worker's transition with an event beyond the seed's words.
func (m *Machine) notifyWorker(step string, try int, status, event, output, next string) {
	m.notify(step, try, "worker", status, output, next)
	if n, ok := m.out[len(m.out)-1].(Notify); ok {
		n.Note.Event = event
		m.out[len(m.out)-1] = n
	}
}

// AdmitReport is the report admission rule every channel applies:
// every reason a worker's report for try of step (0: the current one) may not
// move the step's phase now, nil when it may. running is the try that runs, 0
// when none does: the machine knows it; a face beside a sidecar reads it from
// the state (RunningTry).
func AdmitReport(st *planspec.State, step string, try, running int, rep planspec.WorkerReport) []string {
	reasons := rep.Problems()
	switch {
	case st.Steps[step] == nil:
		return append(reasons, NoStep(st, step).Error())
	case running == 0:
		return append(reasons, fmt.Sprintf("stale: step %s has no try running now", step))
	case try != 0 && try != running:
		return append(reasons, fmt.Sprintf("stale: try %d of step %s is over; the current try is %d", try, step, running))
	}
	if t, ok := transitions[rep.Status]; ok {
		phase := ""
		if run := st.StepRuns[step]; run != nil {
			phase = run.Phase
		}
		if !slices.Contains(t.from, phase) {
			reasons = append(reasons, transitionRefusal(rep.Status, phase))
		}
	}
	return reasons
}

// RunningTry is step id's try that the state says runs, 0 when none does.
func RunningTry(st *planspec.State, id string) int {
	if run := st.StepRuns[id]; run != nil && run.Status == planspec.StatusInProgress {
		return run.Tries
	}
	return 0
}

func transitionRefusal(status, phase string) string {
	switch {
	case phase == planspec.PhaseDispatching && status != planspec.ReportBlocked:
		return fmt.Sprintf("%s before accepted: the step is dispatching; report accepted first, with your first action as evidence", status)
	case phase == planspec.PhaseReviewing:
		return fmt.Sprintf("%s after done: the worker said done and stepseq is verifying; nothing more is taken for this try", status)
	case phase == planspec.PhaseInProgress && status == planspec.ReportAccepted:
		return "accepted twice: the step is already in_progress; send milestone, blocked or done"
	}
	if phase == "" {
		phase = "not started"
	}
	return fmt.Sprintf("%s is not allowed while the step is %s", status, phase)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// reportDeadlines are the times the running try's timers fire at.
func (m *Machine) reportDeadlines(r *tryRun) []time.Time {
	run := m.st.Run(r.step)
	required := m.st.ReportsMode(r.step) == planspec.ReportsRequired
	var out []time.Time
	switch run.Phase {
	case planspec.PhaseDispatching:
		if required {
			out = append(out, r.dispatched.Add(m.launchTimeout(r.step)))
		}
	case planspec.PhaseInProgress:
		if required {
			out = append(out, r.lastActivity().Add(m.milestoneTimeout(r.step)))
		}
	default:
		return nil
	}
	if idle := m.idleTimeout(r.step); idle > 0 {
		out = append(out, m.lastActivity(r).Add(idle))
	}
	if run.Phase == planspec.PhaseInProgress || !m.st.UsesReports(r.step) {
		out = append(out, m.lastNote.Add(m.heartbeat()))
	}
	return out
}

func (r *tryRun) lastActivity() time.Time {
	if r.lastReport.After(r.dispatched) {
		return r.lastReport
	}
	return r.dispatched
}

func (m *Machine) lastActivity(r *tryRun) time.Time {
	t := r.lastActivity()
	if m.cfg.Probe != nil {
		out := m.cfg.Probe.LastOutput()
		if so, ok := m.cfg.Probe.(StepOutputs); ok && m.graph() {
			out = so.LastOutputOf(r.step)
		}
		if out.After(t) {
			t = out
		}
	}
	return t
}

// reportTimers acts on the running try's timers that are due.
func (m *Machine) reportTimers(r *tryRun) {
	run := m.st.Run(r.step)
	required := m.st.ReportsMode(r.step) == planspec.ReportsRequired
	switch {
	case run.Phase == planspec.PhaseDispatching && required && !m.now.Before(r.dispatched.Add(m.launchTimeout(r.step))):
		r.stopReason = fmt.Sprintf("launch timeout: no accepted report in %s", planspec.Duration(m.launchTimeout(r.step)))
		m.journal(Entry{Event: "timeout", Step: r.step, Try: r.try, Reason: r.stopReason})
		m.log(slog.LevelWarn, "launch timeout: stopping the agent", "step", r.step, "try", r.try)
		m.notifyEvent(r.step, r.try, planspec.ReportMilestone, EventTimeout, r.stopReason, "the try fails and is retried by the usual rules")
		m.emit(StopAgent{Step: r.step, Try: r.try, Reason: r.stopReason})
		return
	case run.Phase == planspec.PhaseInProgress && required && !m.now.Before(r.lastActivity().Add(m.milestoneTimeout(r.step))):
		m.block(r, fmt.Sprintf("%s: no report for %s (milestone timeout)", r.step, planspec.Duration(m.milestoneTimeout(r.step))))
		return
	}
	if idle := m.idleTimeout(r.step); idle > 0 && (run.Phase == planspec.PhaseDispatching || run.Phase == planspec.PhaseInProgress) &&
		!m.now.Before(m.lastActivity(r).Add(idle)) {
		m.block(r, fmt.Sprintf("%s: no output and no report for %s (idle timeout)", r.step, planspec.Duration(idle)))
		return
	}
	if (run.Phase == planspec.PhaseInProgress || !m.st.UsesReports(r.step) && run.Phase == planspec.PhaseDispatching) &&
		!m.now.Before(m.lastNote.Add(m.heartbeat())) {
		phase := run.Phase
		if !m.st.UsesReports(r.step) {
			phase = "running"
		}
		m.notify(r.step, r.try, "stepseq", "heartbeat", fmt.Sprintf("still %s, nothing new for %s", phase, planspec.Duration(m.heartbeat())), "waiting for the worker")
	}
}

// block holds the running try: phase blocked, one blocker, the user told at once. A
// later report from the worker clears it.
func (m *Machine) block(r *tryRun, text string) {
	m.st.Run(r.step).Phase = planspec.PhaseBlocked
	r.blockedBy = "timeout"
	addBlocker(m.st, text)
	m.markDirty("blocked")
	m.journal(Entry{Event: "timeout", Step: r.step, Try: r.try, Reason: text})
	m.log(slog.LevelWarn, "step blocked", "step", r.step, "try", r.try, "why", text)
	m.notifyEvent(r.step, r.try, planspec.PhaseBlocked, EventTimeout, text, "a report from the worker clears it; or stepseq retry "+r.step)
}

// stepSetting is a step's duration setting, else the plan's, else def.
func (m *Machine) stepSetting(id string, pick func(step *planspec.StepSpec, plan *planspec.Settings) (planspec.Duration, planspec.Duration), def time.Duration) time.Duration {
	sp := m.st.Steps[id]
	if sp == nil {
		sp = &planspec.StepSpec{}
	}
	step, plan := pick(sp, &m.st.Settings)
	switch {
	case step > 0:
		return time.Duration(step)
	case plan > 0:
		return time.Duration(plan)
	}
	return def
}

func (m *Machine) launchTimeout(id string) time.Duration {
	return m.stepSetting(id, func(s *planspec.StepSpec, p *planspec.Settings) (planspec.Duration, planspec.Duration) {
		return s.LaunchTimeout, p.LaunchTimeout
	}, DefaultLaunchTimeout)
}

func (m *Machine) milestoneTimeout(id string) time.Duration {
	return m.stepSetting(id, func(s *planspec.StepSpec, p *planspec.Settings) (planspec.Duration, planspec.Duration) {
		return s.MilestoneTimeout, p.MilestoneTimeout
	}, DefaultMilestoneTimeout)
}

// idleTimeout is 0 unless the step or plan sets one.
func (m *Machine) idleTimeout(id string) time.Duration {
	return m.stepSetting(id, func(s *planspec.StepSpec, p *planspec.Settings) (planspec.Duration, planspec.Duration) {
		return s.IdleTimeout, p.IdleTimeout
	}, 0)
}

func (m *Machine) heartbeat() time.Duration {
	if m.st != nil && m.st.Settings.Heartbeat > 0 {
		return time.Duration(m.st.Settings.Heartbeat)
	}
	return DefaultHeartbeat
}

func addBlocker(st *planspec.State, text string) {
	if !slices.Contains(st.Blockers, text) {
		st.Blockers = append(st.Blockers, text)
	}
}

// clearReportBlockers drops the blockers a worker's report or a report timer set.
func clearReportBlockers(st *planspec.State, id string) {
	st.Blockers = slices.DeleteFunc(st.Blockers, func(b string) bool {
		rest, ok := strings.CutPrefix(b, id+": ")
		return ok && (strings.HasPrefix(rest, "blocked: ") || strings.HasPrefix(rest, "no report for ") || strings.HasPrefix(rest, "no output and no report"))
	})
}
