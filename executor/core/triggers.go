package core

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/stepseq/stepseq/planspec"
)

// Trigger asks the sidecar to run a reconcile pass, and with Step set to re-run that
// step and the ones after it.
type Trigger struct {
	Step string `json:"step,omitempty"`
	From string `json:"from"` // check, trigger, hook, retry, mcp
	At   string `json:"at"`
	// Retry asks for a new try of a blocked or failed step (`stepseq retry`),
	// where Step alone re-runs a step and the ones after it.
	Retry bool `json:"retry,omitempty"`
	// Answer, when set, is a person's answer to the gate Step names.
	Answer *Answer `json:"answer,omitempty"`
	// Budget changes the run's budget (`stepseq budget usd=+2`), or step
	// Step's when Step is set: the changes as planspec.ParseBudgetChanges
	// reads them, joined by commas. It re-runs nothing.
	Budget string `json:"budget,omitempty"`
	// ID, when set, names the command the trigger carries out: once applied
	// it is listed in the state (Settings.Applied) in the write that holds
	// its effect, and a trigger with an id listed there is not applied again.
	ID string `json:"id,omitempty"`
}

// ErrNoStep is matched by a command that names a step the plan does not have.
var ErrNoStep = errors.New("no step")

// ErrNotRetryable is matched by a retry of a step that is neither blocked nor
// failed: a DONE step's work stands, and a trigger is what re-runs it.
var ErrNotRetryable = errors.New("not blocked or failed")

// NoStep is the one refusal of a step that st's plan does not have.
func NoStep(st *planspec.State, id string) error {
	var ids []string
	if st != nil {
		ids = st.StepQueue
	}
	return fmt.Errorf("%w %q in the plan (steps: %s)", ErrNoStep, id, strings.Join(ids, ", "))
}

// CheckTrigger makes every check that a trigger or a retry of a step needs
// against st, without changing it: every face asks it before it queues one.
func CheckTrigger(st *planspec.State, t Trigger) error {
	if t.Answer != nil {
		_, err := CheckAnswer(st, GateRef{Step: t.Step, Plan: t.Answer.Plan}, *t.Answer)
		return err
	}
	if !t.Retry {
		if st == nil || !slices.Contains(st.StepQueue, t.Step) {
			return NoStep(st, t.Step)
		}
		return nil
	}
	return checkRetry(st, t.Step)
}

// checkRetry allows a retry of a blocked or failed step, or of a loop's last
// step whose loop did not converge (it is granted one more round).
func checkRetry(st *planspec.State, id string) error {
	if st == nil || !slices.Contains(st.StepQueue, id) {
		return NoStep(st, id)
	}
	if _, l := unconverged(st, id); l != nil {
		return nil
	}
	run := st.StepRuns[id]
	if run == nil {
		run = &planspec.StepRun{Status: planspec.StatusPending}
	}
	if run.Status != planspec.StatusFailed && run.Phase != planspec.PhaseBlocked {
		return fmt.Errorf("step %s is %s, %w: `stepseq trigger %s` re-runs a finished step", id, strings.ToLower(run.Status), ErrNotRetryable, id)
	}
	return nil
}

// Rerun resets step id and every step after it to run again: PENDING, no tries,
// their blockers gone, the cursor on id (never past an earlier step still to run)
// and the plan IN_PROGRESS.
func Rerun(st *planspec.State, id string) error {
	at := slices.Index(st.StepQueue, id)
	if at < 0 {
		return NoStep(st, id)
	}
	for _, later := range st.StepQueue[at:] {
		run := st.Run(later)
		run.Agent = runAnew(run.Agent, run.Tries)
		run.Status = planspec.StatusPending
		run.Tries = 0
		run.Error = nil
		run.Stdout = nil
		run.Skipped = false
		run.Phase = planspec.PhasePlanned
		run.Reports = nil
		run.Result = nil
		run.Gate = nil
		clearBlocker(st, later)
	}
	st.CurrentStep = min(st.CurrentStep, at)
	st.Status = planspec.StatusInProgress
	resetLoops(st, at)
	return nil
}

// TriggerBurst is what a batch of queued triggers asks for, coalesced: the
// retries in order, and one re-run from the earliest step any trigger names.
type TriggerBurst struct {
	Answers []Trigger // answers to gates, in order
	Retries []Trigger
	Rerun   string   // "" when no trigger asks for a re-run
	Count   int      // the re-run triggers it stands for
	Unknown []string // steps named that the plan does not have
}

// CoalesceTriggers decides what the triggers ts ask of st without changing it: a
// burst of re-runs is one re-run from the earliest step named (it re-runs the
// ones after it too), so ten thousand triggers are one re-run and one write.
// A trigger with no step (a handed-over check) asks for a pass only.
func CoalesceTriggers(st *planspec.State, ts []Trigger) TriggerBurst {
	var b TriggerBurst
	earliest := -1
	for _, t := range ts {
		switch at := slices.Index(st.StepQueue, t.Step); {
		case t.Answer != nil:
			b.Answers = append(b.Answers, t)
		case t.Step == "" || t.Budget != "":
		case t.Retry:
			b.Retries = append(b.Retries, t)
		case at < 0:
			if !slices.Contains(b.Unknown, t.Step) {
				b.Unknown = append(b.Unknown, t.Step)
			}
		default:
			b.Count++
			if earliest < 0 || at < earliest {
				earliest = at
			}
		}
	}
	if earliest >= 0 {
		b.Rerun = st.StepQueue[earliest]
	}
	return b
}

// Retry gives a blocked or failed step a new try, as `stepseq retry` asks: the
// blocker's text and its next go into the error, so the troubleshoot prompt carries
// them, and a step out of tries is granted one more.
//
// A loop that did not converge is granted one more round instead: its last step
// stays verified, and the next round starts at the group's first step.
func Retry(st *planspec.State, id string, limit int) error {
	if err := checkRetry(st, id); err != nil {
		return err
	}
	if reopenGate(st, id) {
		return nil
	}
	if g, l := unconverged(st, id); l != nil {
		clearBlocker(st, g.ID)
		st.Run(id).Phase = planspec.PhaseDone
		l.Max++
		l.Ended, l.Reason = "", ""
		nextRound(st, g, l)
		st.Status = planspec.StatusInProgress
		return nil
	}
	run := st.Run(id)
	why := workerBlocker(st, id)
	if run.Error != nil && *run.Error != "" && !strings.Contains(why, *run.Error) {
		why = *run.Error + "; " + why
	}
	// A worker's blocker line names its next already: the prompt says it once.
	if next := blockerNext(run); next != "" && !strings.Contains(why, "next: "+oneLine(next)) {
		why += "; next: " + next
	}
	run.Error = &why
	if run.Tries == 0 {
		run.Tries = 1 // the troubleshoot prompt needs a try to name
	}
	run.Status = planspec.StatusFailed
	run.Phase = planspec.PhasePlanned
	if run.Tries >= limit {
		if run.Agent == nil {
			run.Agent = &planspec.AgentRecord{}
		}
		run.Agent.Granted += run.Tries - limit + 1
	}
	clearBlocker(st, id)
	if at := slices.Index(st.StepQueue, id); at < st.CurrentStep {
		st.CurrentStep = at
	}
	st.Status = planspec.StatusInProgress
	return nil
}

// blockerNext is the next of the worker's last blocked report.
func blockerNext(run *planspec.StepRun) string {
	for i := len(run.Reports) - 1; i >= 0; i-- {
		if r := run.Reports[i]; r.Status == planspec.ReportBlocked {
			return r.Next
		}
	}
	return ""
}
