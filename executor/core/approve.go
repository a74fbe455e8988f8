package core

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/stepseq/stepseq/planspec"
)

// A person's yes. A step with approve waits in phase awaiting_approval before
// its first try, and a plan with approval before its first step; the wait is
// told at once, and an answer (a Trigger carrying an Answer) opens the gate or
// blocks the step with the answer's note. The answer is an input like any
// other: the machine checks it against the state it holds, records it, and
// journals who gave it, through which face, and when.

// EventAwaitingApproval is a blocked notification's event: a gate asks for a
// person's yes. EventApproved is the answer's, a milestone.
const (
	EventAwaitingApproval = "awaiting_approval"
	EventApproved         = "approved"
)

// ErrNotWaiting is matched by an answer to a gate that does not wait for one:
// the error says what the run waits for instead.
var ErrNotWaiting = errors.New("not awaiting approval")

// Answer is a person's answer to a gate, queued as a Trigger's: Trigger.Step
// names the step whose gate it answers, or the step the plan's gate holds when
// Plan is set.
type Answer struct {
	Approve bool   `json:"approve"`
	Plan    bool   `json:"plan,omitempty"`
	By      string `json:"by"`
	Face    string `json:"face"` // cli, mcp, web, timeout
	Note    string `json:"note,omitempty"`
}

// word is the answer as the gate records it.
func (a Answer) word() string {
	if a.Approve {
		return planspec.AnswerApproved
	}
	return planspec.AnswerRejected
}

// GateRef names a gate: the plan's (Plan, held at Step) or Step's own.
type GateRef struct {
	Step string
	Plan bool
}

func (g GateRef) String() string {
	if g.Plan {
		return "the plan's gate"
	}
	return "step " + g.Step + "'s gate"
}

// told is the step a notification of the gate is about: none for the plan's.
func (g GateRef) told() string {
	if g.Plan {
		return ""
	}
	return g.Step
}

// gateOf is where the gate's record lives in st.
func gateOf(st *planspec.State, g GateRef) **planspec.Gate {
	if g.Plan {
		return &st.Settings.Gate
	}
	return &st.Run(g.Step).Gate
}

// peekGate is the gate's record without creating a run for it.
func peekGate(st *planspec.State, g GateRef) *planspec.Gate {
	if g.Plan {
		return st.Settings.Gate
	}
	if run := st.StepRuns[g.Step]; run != nil {
		return run.Gate
	}
	return nil
}

// WaitingGate is the gate st waits on, asked and not answered: the plan's
// first, else the step's at the cursor.
func WaitingGate(st *planspec.State) (GateRef, bool) {
	if st == nil || st.Status == planspec.StatusDone || st.CurrentStep >= len(st.StepQueue) {
		return GateRef{}, false
	}
	id := st.StepQueue[st.CurrentStep]
	if st.Settings.Gate.Waiting() {
		return GateRef{Step: id, Plan: true}, true
	}
	if run := st.StepRuns[id]; run != nil && run.Gate.Waiting() {
		return GateRef{Step: id}, true
	}
	return GateRef{}, false
}

// ResolveGate is the gate an answer naming step ("" for whichever waits)
// answers in st: the plan's while it waits, else the step's own. A step the
// plan lacks is ErrNoStep.
func ResolveGate(st *planspec.State, step string) (GateRef, error) {
	if step == "" {
		if g, ok := WaitingGate(st); ok {
			return g, nil
		}
		return GateRef{}, fmt.Errorf("%w: no gate waits for an answer; %s", ErrNotWaiting, waitsInstead(st))
	}
	if st == nil || !slices.Contains(st.StepQueue, step) {
		return GateRef{}, NoStep(st, step)
	}
	if g, ok := WaitingGate(st); ok && g.Plan && g.Step == step {
		return g, nil
	}
	// The plan's gate, answered at this step, takes a second answer there.
	if pg := st.Settings.Gate; pg != nil && pg.Answer != "" && pg.Step == step {
		if sp := st.Steps[step]; sp == nil || sp.Approve == nil || !pg.Approved() {
			return GateRef{Step: step, Plan: true}, nil
		}
	}
	return GateRef{Step: step}, nil
}

// CheckAnswer makes every check an answer to gate g needs against st, without
// changing it: every face asks it before it queues one, and the machine again
// when the answer comes. A gate answered the same way already takes the answer
// again (again is true): a second yes is an answer, not an error.
func CheckAnswer(st *planspec.State, g GateRef, a Answer) (again bool, err error) {
	if st == nil || !slices.Contains(st.StepQueue, g.Step) {
		return false, NoStep(st, g.Step)
	}
	gate := peekGate(st, g)
	switch {
	case gate.Waiting():
		return false, nil
	case gate != nil && gate.Answer == a.word():
		return true, nil
	case gate != nil && gate.Answer != "":
		return false, fmt.Errorf("%w: %s was %s by %s (%s) at %s; %s", ErrNotWaiting, g, gate.Answer, gate.By, gate.Face, gate.AtIso, waitsInstead(st))
	}
	if !g.Plan {
		if sp := st.Steps[g.Step]; sp == nil || sp.Approve == nil {
			return false, fmt.Errorf("%w: step %s has no gate; %s", ErrNotWaiting, g.Step, waitsInstead(st))
		}
	}
	return false, fmt.Errorf("%w: %s is not asked yet; %s", ErrNotWaiting, g, waitsInstead(st))
}

// waitsInstead says what st waits for, for a refusal: the gate that waits,
// the step at the cursor and its phase, or the plan's end.
func waitsInstead(st *planspec.State) string {
	switch {
	case st == nil:
		return "there is no plan"
	case st.Status == planspec.StatusDone || st.CurrentStep >= len(st.StepQueue):
		return "the plan is DONE"
	}
	if g, ok := WaitingGate(st); ok {
		return fmt.Sprintf("the run waits on %s (answer it with `%s`)", g, AnswerCommand("", g, true))
	}
	id := st.StepQueue[st.CurrentStep]
	if b, ok := StepBlocker(st, id); ok {
		return fmt.Sprintf("the run waits for step %s, blocked: %s (`stepseq retry %s` asks again or tries again)", id, b, id)
	}
	return fmt.Sprintf("the run waits for step %s, %s", id, DisplayPhase(st, id))
}

// AnswerCommand is the command that answers gate g of run (""": the
// workspace's own): stepseq approve, or stepseq reject with a note.
func AnswerCommand(run string, g GateRef, approve bool) string {
	cmd := "stepseq approve"
	if !approve {
		cmd = "stepseq reject"
	}
	if run != "" {
		cmd += " --run " + run
	}
	if !g.Plan {
		cmd += " " + g.Step
	}
	if !approve {
		cmd += " --note WHY"
	}
	return cmd
}

// approvalGate is the gate that holds step id before it starts, in
// Reconcile's order: the plan's until it is approved and while no step has
// started, then the step's own before its first try. A try already under
// way (interrupted, offered again: a try counted) passed its gate.
func approvalGate(st *planspec.State, id string, spec *planspec.StepSpec, run *planspec.StepRun) (Decision, bool) {
	if run.Tries > 0 {
		return Decision{}, false
	}
	if a := st.Settings.Approval; a != nil && !st.Settings.Gate.Approved() && !planStarted(st) {
		return Decision{Action: AwaitingApproval, Step: id, PlanGate: true, At: st.Settings.Gate.Deadline(a),
			Reason: "awaiting approval: plan " + st.Settings.Name + " waits for a person's yes before its first step"}, true
	}
	if spec != nil && spec.Approve != nil && !run.Gate.Approved() {
		return Decision{Action: AwaitingApproval, Step: id, At: run.Gate.Deadline(spec.Approve),
			Reason: "awaiting approval: step " + id + " waits for a person's yes before its first try"}, true
	}
	return Decision{}, false
}

// planStarted reports whether a step of st has run: a plan's gate is asked
// before its first step only.
func planStarted(st *planspec.State) bool {
	for _, run := range st.StepRuns {
		if run != nil && (run.Tries > 0 || run.Status == planspec.StatusDone && !run.Skipped) {
			return true
		}
	}
	return false
}

// ask records that the gate of d waits and tells the user, once: a gate
// already asked (by this machine, or the stepseq that wrote the state) is
// not told again. An asked gate whose timeout has passed is answered as its
// approval says, and the core decides again.
func (m *Machine) ask(d Decision) {
	g := GateRef{Step: d.Step, Plan: d.PlanGate}
	rec := gateOf(m.st, g)
	if *rec != nil && (*rec).AskedIso != "" {
		if !d.At.IsZero() && !m.now.Before(d.At) {
			m.answerTimeout(g)
			if m.graph() {
				m.decideAgain = true // advanceGraph decides again after its pass
			} else {
				m.advance()
			}
			return
		}
		m.approvalAt = d.At
		return
	}
	*rec = &planspec.Gate{AskedIso: planspec.FormatISO(m.now)}
	if g.Plan {
		(*rec).Step = d.Step
	} else {
		m.st.Run(d.Step).Phase = planspec.PhaseAwaitingApproval
	}
	m.approvalAt = (*rec).Deadline(m.approvalOf(g))
	m.markDirty("awaiting approval")
	what := GateQuestion(m.st, g)
	m.journal(Entry{Event: "approval-asked", Step: d.Step, Reason: what, Detail: map[string]any{"plan": g.Plan}})
	m.log(slog.LevelInfo, "awaiting approval", "gate", g.String(), "answer", AnswerCommand(m.cfg.Run, g, true))
	next := AnswerCommand(m.cfg.Run, g, true) + " (or " + AnswerCommand(m.cfg.Run, g, false) + ")"
	m.notifyEvent(g.told(), 0, planspec.PhaseBlocked, EventAwaitingApproval, what, next)
	// The request goes out once the state records it: an answer that reads
	// the state after hearing of the request finds the gate waiting.
	m.tellAfterWrite = append(m.tellAfterWrite, m.out[len(m.out)-1])
	m.out = m.out[:len(m.out)-1]
}

// approvalOf is the setting of gate g.
func (m *Machine) approvalOf(g GateRef) *planspec.Approval {
	if g.Plan {
		return m.st.Settings.Approval
	}
	if sp := m.st.Steps[g.Step]; sp != nil {
		return sp.Approve
	}
	return nil
}

// GateQuestion says what gate g of st asks: the plan and its steps, or the
// step and its instruction; and what its timeout will do. Every face shows
// the request in these words.
func GateQuestion(st *planspec.State, g GateRef) string {
	var what string
	var a *planspec.Approval
	if g.Plan {
		what = fmt.Sprintf("approval asked: plan %s, %s: %s", st.Settings.Name, countOf(len(st.StepQueue), "step"),
			FirstChars(strings.Join(st.StepQueue, ", "), 300))
		a = st.Settings.Approval
	} else {
		what = "approval asked before step " + g.Step + " runs"
		if sp := st.Steps[g.Step]; sp != nil {
			what += ": " + oneLine(sp.Title) + " — " + FirstChars(oneLine(sp.Instruction), 300)
			a = sp.Approve
		}
	}
	if a != nil && a.Timeout > 0 {
		fate := "rejected"
		if a.TimeoutApproves() {
			fate = "approved"
		}
		what += fmt.Sprintf(" (unanswered after %s, it is %s)", a.Timeout, fate)
	}
	return what
}

// tellAsked sends the requests a write recorded.
func (m *Machine) tellAsked() {
	for _, e := range m.tellAfterWrite {
		m.emit(e)
	}
	m.tellAfterWrite = nil
}

// answerTimeout answers gate g as its approval's onTimeout says.
func (m *Machine) answerTimeout(g GateRef) {
	a := m.approvalOf(g)
	note := "no answer in time"
	if a != nil {
		note = "no answer within " + a.Timeout.String()
	}
	m.answer(g, Answer{Approve: a != nil && a.TimeoutApproves(), Plan: g.Plan, By: "stepseq", Face: planspec.FaceTimeout, Note: note},
		planspec.FormatISO(m.now))
}

// takeAnswers applies the answers among ts at once, whatever runs: a gate's
// step is not running while its gate waits, and a second answer is
// journaled when it comes. It returns the other triggers.
func (m *Machine) takeAnswers(ts []Trigger) []Trigger {
	if m.st == nil || m.bad != nil || !slices.ContainsFunc(ts, func(t Trigger) bool { return t.Answer != nil }) {
		return ts
	}
	rest := make([]Trigger, 0, len(ts))
	for _, t := range m.notApplied(ts) {
		if t.Answer == nil {
			rest = append(rest, t)
			continue
		}
		m.answers([]Trigger{t})
		m.noteApplied([]Trigger{t})
	}
	return rest
}

// answers applies the answers among queued triggers, before the retries and
// re-runs: a yes comes first.
func (m *Machine) answers(ts []Trigger) {
	for _, t := range ts {
		g := GateRef{Step: t.Step, Plan: t.Answer.Plan}
		at := t.At
		if at == "" {
			at = planspec.FormatISO(m.now)
		}
		m.answer(g, *t.Answer, at)
	}
}

// answer records a's answer to gate g, given at at, after checking it
// against the state held: a yes lets the step start; a no blocks it with the
// note as its blocker, until someone retries it, which asks again.
func (m *Machine) answer(g GateRef, a Answer, at string) {
	detail := map[string]any{"by": a.By, "face": a.Face, "at": at, "plan": g.Plan}
	if a.Note != "" {
		detail["note"] = a.Note
	}
	again, err := CheckAnswer(m.st, g, a)
	if err != nil {
		m.log(slog.LevelWarn, "answer refused", "gate", g.String(), "err", err)
		m.journal(Entry{Event: "answer-refused", Step: g.Step, Reason: err.Error(), Detail: detail})
		return
	}
	if again {
		detail["again"] = true
		m.journal(Entry{Event: a.word(), Step: g.Step, Reason: a.Note, Detail: detail})
		return
	}
	rec := gateOf(m.st, g)
	gate := **rec
	gate.Answer, gate.By, gate.Face, gate.AtIso, gate.Note = a.word(), a.By, a.Face, at, a.Note
	*rec = &gate
	m.journal(Entry{Event: a.word(), Step: g.Step, Reason: a.Note, Detail: detail})
	m.markDirty(a.word() + " by " + a.By)
	who := a.By + " (" + a.Face + ")"
	if a.Approve {
		if run := m.st.Run(g.Step); run.Phase == planspec.PhaseAwaitingApproval {
			run.Phase = planspec.PhasePlanned
		}
		m.log(slog.LevelInfo, "approved", "gate", g.String(), "by", a.By, "face", a.Face)
		out := "approved by " + who
		if a.Note != "" {
			out += ": " + a.Note
		}
		m.notifyEvent(g.told(), 0, planspec.ReportMilestone, EventApproved, out, "step "+g.Step)
		return
	}
	m.log(slog.LevelWarn, "rejected", "gate", g.String(), "by", a.By, "face", a.Face, "note", a.Note)
	m.reject(g, who, a.Note)
}

// reject blocks the gate's step with the note as its blocker: FAILED and
// blocked, as a worker's blocked report leaves a step, so that every face
// shows it blocked and `stepseq retry` is what asks again.
func (m *Machine) reject(g GateRef, who, note string) {
	blocker := g.Step + ": rejected by " + who
	if g.Plan {
		blocker = g.Step + ": plan " + m.st.Settings.Name + " rejected by " + who
	}
	if note != "" {
		blocker += ": " + oneLine(note)
	}
	run := m.st.Run(g.Step)
	run.Status, run.Phase = planspec.StatusFailed, planspec.PhaseBlocked
	clearBlocker(m.st, g.Step)
	m.st.Blockers = append(m.st.Blockers, blocker)
	m.toldBlocked = ""
}

// reopenGate is `stepseq retry` of a step whose gate (or the plan's, held at
// it) was rejected: the step is PENDING again and the gate asks anew. It
// reports whether it was one.
func reopenGate(st *planspec.State, id string) bool {
	run := st.StepRuns[id]
	if run == nil || run.Tries > 0 {
		return false
	}
	plan := st.Settings.Gate.Rejected() && st.CurrentStep < len(st.StepQueue) && st.StepQueue[st.CurrentStep] == id
	if !run.Gate.Rejected() && !plan {
		return false
	}
	if plan {
		st.Settings.Gate = nil
	}
	if run.Gate.Rejected() {
		run.Gate = nil
	}
	run.Status, run.Phase, run.Error = planspec.StatusPending, planspec.PhasePlanned, nil
	clearBlocker(st, id)
	if at := slices.Index(st.StepQueue, id); at < st.CurrentStep {
		st.CurrentStep = at
	}
	st.Status = planspec.StatusInProgress
	return true
}
