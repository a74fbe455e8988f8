package core

import (
	"fmt"
	"strings"
	"time"

	"github.com/stepseq/stepseq/planspec"
	"github.com/stepseq/stepseq/planspec/plan"
)

// Action is what a reconcile pass asks its driver to do next.
type Action int

const (
	// Idle: the plan is DONE; nothing to run.
	Idle Action = iota
	// Launch: start an agent for Decision.Step with Decision.Prompt.
	Launch
	// Gated: the step's `when` is false; try again when the files change.
	Gated
	// Delayed: stepDelayMinutes has not passed; try again at Decision.At.
	Delayed
	// Blocked: the step exhausted its retries and a blocker is recorded.
	Blocked
	// Running: an agent started earlier for the step is still alive.
	Running
	// LimitWaiting: every agent of the step's try was out of quota; the same try
	// runs again at Decision.At, when the limit resets.
	LimitWaiting
	// AwaitingApproval: the step (or, with Decision.PlanGate, the plan) waits
	// for a person's yes before it starts; Decision.At is when the wait times
	// out, zero when it never does.
	AwaitingApproval
	// Merging: the branches of Decision.Merge are merged before Decision.Step,
	// their join, launches.
	Merging
	// OverBudget: a bound of the run's or the step's budget is reached;
	// nothing launches until it is raised.
	OverBudget
)

var actionNames = [...]string{"idle", "launch", "gated", "delayed", "blocked", "running", "waiting", "awaiting_approval", "merging", "budget"}

func (a Action) String() string { return actionNames[a] }

// Decision is the outcome of a reconcile pass.
type Decision struct {
	Action Action
	Step   string
	Prompt string
	At     time.Time // Delayed: when the step may start
	Reason string    // why, for logs and the journal
	// Interrupted: the step's previous agent vanished without reporting; the new try
	// does not count toward the retry limit.
	Interrupted bool
	// Reoffer: the step's try is pulled (agent: mcp) and was on offer when stepseq
	// stopped. No process of it ran here, so nothing was interrupted: the same
	// try is offered again, with the same prompt and token, and no try is spent.
	Reoffer bool
	// PlanGate: an AwaitingApproval of the plan's gate, held at Step.
	PlanGate bool
	// Merge are the worktree steps whose branches a Merging decision merges.
	Merge []string
}

// Facts are what the world says during a pass: the time, whether an earlier agent
// lives, and the value of a step's conditions.
type Facts struct {
	Now time.Time
	// MaxRetries is the retry limit when neither the step nor the plan sets one
	// (STEP_MAX_RETRIES, default 3).
	MaxRetries int
	// Alive reports whether the agent recorded for step id is still running. Nil
	// means no agent from an earlier process can be alive.
	Alive func(id string) bool
	// Cond evaluates the step's "when" or "skip" expression. Nil means none is set.
	Cond func(id, kind string) (bool, error)
	// Skipped, when set, hears each step the pass marks DONE by its skip, so
	// that the user is told of it as of any other step's end.
	Skipped func(id string)
	// Render renders step id's templates when its try starts:
	// its title, instruction and agent arguments (planspec.RenderSpec). Nil
	// means templates are not rendered.
	Render func(id string) (*planspec.StepSpec, error)
	// Loop, when set, hears each round that starts and each loop left, for
	// the journal and the user.
	Loop func(LoopEvent)
}

// Reconcile applies the check contract to st in memory: it advances the cursor past
// DONE steps, turns FAILED steps into retries or a blocker, honours gates, skips and
// delays, and says what the driver must do. It launches nothing and touches no file;
// it reports whether st changed. It stays one function over the complexity bound
// because the original's check reads as one ordered list of rules, and splitting it hides their order.
func Reconcile(st *planspec.State, f Facts) (Decision, bool) {
	if st.Status == planspec.StatusDone {
		return Decision{Action: Idle, Reason: "plan is DONE"}, false
	}
	changed := false
	for {
		if st.CurrentStep >= len(st.StepQueue) {
			st.Status = planspec.StatusDone
			return Decision{Action: Idle, Reason: "no steps left"}, true
		}
		id := st.StepQueue[st.CurrentStep]
		if d, stop, ch := enterLoop(st, id, f); stop {
			return d, changed || ch
		} else if ch {
			changed = true
		}
		spec := st.Steps[id]
		run := st.Run(id)
		interrupted, reoffer := false, false
		switch run.Status {
		case planspec.StatusDone:
			d, stop, ch := pastDone(st, id, f)
			changed = changed || ch
			if stop {
				return d, changed
			}
			continue
		case planspec.StatusFailed:
			d, blocked, ch := failedTry(st, id, run, f)
			changed = changed || ch
			if blocked {
				return d, changed
			}
		case planspec.StatusInProgress:
			var d Decision
			var running bool
			d, running, interrupted, reoffer = unfinishedTry(st, id, run, f)
			if running {
				return d, changed
			}
			changed = changed || interrupted
		}
		if skipByCondition(id, run, f) {
			changed = true
			continue
		}
		if d, held, ch := abortsFirst(st, id, spec, run, f); held {
			return d, changed || ch
		}
		if d, held := heldBack(st, id, spec, run, f, reoffer); held {
			return d, changed
		}
		d, started, ch := startTry(st, id, spec, run, f, interrupted, reoffer)
		changed = changed || ch
		if !started {
			// The try failed before anything was launched; the retry rule
			// above decides what comes next.
			continue
		}
		return d, changed
	}
}

// startTry decides a step free to start: its pulled try offered again, a wait
// for the plan's stepDelay, or the launch of its try with its templates
// rendered. started is false when rendering failed the try before anything
// was launched.
func startTry(st *planspec.State, id string, spec *planspec.StepSpec, run *planspec.StepRun, f Facts, interrupted, reoffer bool) (d Decision, started, changed bool) {
	if reoffer {
		return Decision{Action: Launch, Step: id, Prompt: reofferPrompt(id, spec, run), Reoffer: true,
			Reason: fmt.Sprintf("try %d offered again: stepseq stopped while it was pulled", run.Tries)}, true, false
	}
	if at, ok := readyAt(st, id); ok && !interrupted && f.Now.Before(at) {
		return Decision{Action: Delayed, Step: id, At: at, Reason: st.StepDelayReason()}, true, false
	}
	rendered, ok := renderTry(st, id, f.Now, f.Render)
	if !ok {
		return Decision{}, false, true
	}
	if rendered != spec {
		spec, changed = rendered, true
	}
	return Decision{Action: Launch, Step: id, Prompt: Prompt(id, spec, run), Interrupted: interrupted,
		Reason: launchReason(run, interrupted)}, true, changed
}

// pastDone decides a DONE step: the cursor moves on, a loop goes round again,
// or the plan stops there (stop, with the decision saying why).
func pastDone(st *planspec.State, id string, f Facts) (d Decision, stop, changed bool) {
	d, move, changed := afterDone(st, id, f)
	switch move {
	case loopStop:
		return d, true, changed
	case loopOn:
		st.CurrentStep++
		changed = true
	}
	return d, false, changed
}

// failedTry decides a FAILED step: blocked (by its worker, or out of tries),
// which holds the plan, or back to PENDING for its retry. It reports whether
// st changed.
func failedTry(st *planspec.State, id string, run *planspec.StepRun, f Facts) (d Decision, blocked, changed bool) {
	if run.Phase == planspec.PhaseBlocked {
		// A worker said it cannot go on: the step holds the plan until
		// someone retries it.
		return Decision{Action: Blocked, Step: id, Reason: workerBlocker(st, id)}, true, false
	}
	limit := RetryLimit(st, id, f.MaxRetries)
	if run.Tries >= limit {
		changed = recordBlocker(st, id, run.Tries)
		return Decision{Action: Blocked, Step: id, Reason: BlockerText(id, run.Tries)}, true, changed
	}
	run.Status = planspec.StatusPending
	return Decision{}, false, true
}

// unfinishedTry decides an IN_PROGRESS step: stepseq's record of a try that
// never got its verdict (its agent was running, or had exited 0 and its
// outputs were awaited, when stepseq stopped). A pulled try is offered again;
// a process that still lives is running; one that is gone interrupted the try,
// which is recorded on run.
func unfinishedTry(st *planspec.State, id string, run *planspec.StepRun, f Facts) (d Decision, running, interrupted, reoffer bool) {
	if run.Agent == nil || run.Agent.StartedIso == "" {
		return Decision{}, false, false, false
	}
	if st.IsPull(id) {
		return Decision{}, false, false, true
	}
	if f.Alive != nil && f.Alive(id) {
		return Decision{Action: Running, Step: id, Reason: "agent from an earlier run is still alive"}, true, false, false
	}
	msg := fmt.Sprintf("Interrupted: the agent started at %s ended without stepseq seeing it finish", run.Agent.StartedIso)
	run.Error = &msg
	return Decision{}, false, true, false
}

// skipByCondition marks the step DONE, skipped, when its skip holds, and tells
// f.Skipped; it reports whether it did.
func skipByCondition(id string, run *planspec.StepRun, f Facts) bool {
	if skip, err := cond(f, id, "skip"); err != nil || !skip {
		return false
	}
	run.Status = planspec.StatusDone
	run.Phase = planspec.PhaseDone
	run.Skipped = true
	run.LastRunIso = planspec.FormatISO(f.Now)
	if f.Skipped != nil {
		f.Skipped(id)
	}
	return true
}

// heldBack says whether the step may not start yet: its when is false (or
// fails), its agents are out of quota until a time still to come, a gate
// waits for a person's yes, or a bound of its budget or the run's is reached
// (a pulled try offered again starts no new work, and is not held).
func heldBack(st *planspec.State, id string, spec *planspec.StepSpec, run *planspec.StepRun, f Facts, reoffer bool) (Decision, bool) {
	if ok, err := cond(f, id, "when"); err != nil || !ok {
		reason := fmt.Sprintf("waiting for when: %s", spec.When)
		if err != nil {
			reason += fmt.Sprintf(" (%v)", err)
		}
		return Decision{Action: Gated, Step: id, Reason: reason}, true
	}
	if at, ok := limitUntil(run); ok && f.Now.Before(at) {
		return Decision{Action: LimitWaiting, Step: id, At: at, Reason: "usage limit: " + run.Agent.Limit.Error}, true
	}
	if d, held := approvalGate(st, id, spec, run); held {
		return d, true
	}
	if b, over := BudgetReached(st, id, f.Now); over && !reoffer {
		return Decision{Action: OverBudget, Step: id, Reason: b.Text()}, true
	}
	return Decision{}, false
}

func cond(f Facts, id, kind string) (bool, error) {
	if f.Cond == nil {
		return kind == "when", nil
	}
	return f.Cond(id, kind)
}

func launchReason(run *planspec.StepRun, interrupted bool) string {
	switch {
	case interrupted:
		return "relaunch after interruption"
	case run.Tries > 0:
		return fmt.Sprintf("retry after %d tries", run.Tries)
	}
	return "step is due"
}

// RetryLimit is the number of tries a step gets: the step's retries, else the plan's
// maxRetries, else def; plus the tries `stepseq retry` granted.
func RetryLimit(st *planspec.State, id string, def int) int {
	granted := 0
	if run := st.StepRuns[id]; run != nil && run.Agent != nil {
		granted = run.Agent.Granted
	}
	if spec := st.Steps[id]; spec != nil && spec.Retries != nil {
		return *spec.Retries + granted
	}
	if st.Settings.MaxRetries != nil {
		return *st.Settings.MaxRetries + granted
	}
	return def + granted
}

// workerBlocker is the blocker a worker's report or a report timer set for id.
func workerBlocker(st *planspec.State, id string) string {
	if b, ok := StepBlocker(st, id); ok {
		return b
	}
	return id + ": blocked"
}

// BlockerText is the original's blocker line.
func BlockerText(id string, tries int) string {
	return fmt.Sprintf("%s: max retries (%d) exceeded", id, tries)
}

// recordBlocker adds the blocker once; the original appended it on every heartbeat.
func recordBlocker(st *planspec.State, id string, tries int) bool {
	text := BlockerText(id, tries)
	for i, b := range st.Blockers {
		if b == text {
			return false
		}
		if strings.HasPrefix(b, id+": max retries (") {
			st.Blockers[i] = text
			return true
		}
	}
	st.Blockers = append(st.Blockers, text)
	return true
}

// clearBlocker drops the step's blockers once it runs again: someone reset it.
func clearBlocker(st *planspec.State, id string) {
	kept := st.Blockers[:0]
	for _, b := range st.Blockers {
		if !isBlockerOf(b, id) {
			kept = append(kept, b)
		}
	}
	st.Blockers = kept
}

// Prompt is the instruction, or on a retry with a stored error the original's
// troubleshoot prompt, word for word.
func Prompt(id string, spec *planspec.StepSpec, run *planspec.StepRun) string {
	instruction := ""
	if spec != nil {
		instruction = spec.Instruction
	}
	if run.Tries > 0 && run.Error != nil && *run.Error != "" {
		return fmt.Sprintf("Step %s failed (tries: %d). Previous run ended with: %s. Please troubleshoot and retry: %s",
			id, run.Tries, *run.Error, instruction)
	}
	return instruction
}

// reofferPrompt is the prompt the pulled try on offer was given: the troubleshoot
// prompt when the try before it failed (BeginTry cleared its error from the step's
// record; the try's errors keep it), else the instruction.
func reofferPrompt(id string, spec *planspec.StepSpec, run *planspec.StepRun) string {
	prev := *run
	prev.Tries, prev.Error = run.Tries-1, nil
	if run.Agent != nil {
		if n := len(run.Agent.Errors); n > 0 && run.Agent.Errors[n-1].Try == prev.Tries {
			prev.Error = &run.Agent.Errors[n-1].Error
		}
	}
	return Prompt(id, spec, &prev)
}

// readyAt is when step id may start under stepDelayMinutes: that long after its own
// last run for a retry, or after the previous step's last run for any step after the
// first. Measuring from the recorded times, rather than sleeping, lets a heartbeat
// that comes late start at once and survives restarts.
func readyAt(st *planspec.State, id string) (time.Time, bool) {
	delay, _ := st.StepDelay()
	if delay <= 0 {
		return time.Time{}, false
	}
	run := st.Run(id)
	ref := ""
	switch {
	case run.Tries > 0:
		ref = run.LastRunIso
	case st.CurrentStep > 0:
		if prev, ok := st.StepRuns[st.StepQueue[st.CurrentStep-1]]; ok {
			ref = prev.LastRunIso
		}
	}
	if ref == "" {
		return time.Time{}, false
	}
	t, err := planspec.ParseISO(ref)
	if err != nil {
		return time.Time{}, false
	}
	return t.Add(delay), true
}

// BeginTry records the launch of a try before the agent starts, as the original
// does: IN_PROGRESS, tries+1, lastRunIso now. A relaunch after an interruption keeps
// the count, so interruptions never exhaust the retry limit.
func BeginTry(st *planspec.State, id string, now time.Time, interrupted bool) int {
	return beginTry(st, id, now, interrupted, interrupted)
}

// ReofferTry records a pulled try offered again after a restart (Decision.Reoffer):
// the same try, no interruption counted, and the worker's reports standing: a try
// it accepted stays in progress, a blocked one blocked. A done that stepseq had
// not verified yet is asked for again (in progress): its verification was lost.
func ReofferTry(st *planspec.State, id string, now time.Time) int {
	phase := st.Run(id).Phase
	try := beginTry(st, id, now, true, false)
	switch phase {
	case planspec.PhaseInProgress, planspec.PhaseBlocked:
		st.Run(id).Phase = phase
	case planspec.PhaseReviewing:
		st.Run(id).Phase = planspec.PhaseInProgress
	}
	return try
}

func beginTry(st *planspec.State, id string, now time.Time, same, interrupted bool) int {
	run := st.Run(id)
	tries := run.Tries + 1
	interruptions := 0
	if run.Agent != nil {
		interruptions = run.Agent.Interruptions
	}
	if same && run.Tries > 0 {
		tries = run.Tries
		if interrupted {
			interruptions++
		}
	}
	run.Status = planspec.StatusInProgress
	run.Phase = planspec.PhaseDispatching
	run.Tries = tries
	run.LastRunIso = planspec.FormatISO(now)
	run.Error = nil
	run.Stdout = nil
	run.Skipped = false
	granted := 0
	var errs []planspec.TryError
	if run.Agent != nil {
		granted, errs = run.Agent.Granted, run.Agent.Errors
	}
	var session planspec.AgentSession
	var limit planspec.LimitHold
	var spend planspec.Spend
	var usage []planspec.TryUsage
	earlier := 0
	if run.Agent != nil {
		session, limit, spend, usage = run.Agent.Session, run.Agent.Limit, run.Agent.Spend, run.Agent.Usage
		earlier = run.Agent.EarlierTries
	}
	var wt *planspec.WorktreeRecord
	if run.Agent != nil && run.Agent.Worktree != nil {
		w := *run.Agent.Worktree
		w.Commit, w.Merged = "", false // a new try's work is committed anew
		wt = &w
	}
	run.Agent = &planspec.AgentRecord{StartedIso: run.LastRunIso, Interruptions: interruptions, Granted: granted, Errors: errs,
		Session: session, Limit: limit, Worktree: wt, Spend: spend, Usage: usage, EarlierTries: earlier}
	clearBlocker(st, id)
	return tries
}

// renderTry renders step id's templates as its try starts: the
// rendered spec replaces the one in st (specs are replaced, never edited in
// place), so that state.json holds the plain prompt. A template that fails to
// evaluate fails the try with the reason: ok is false and nothing may launch.
func renderTry(st *planspec.State, id string, now time.Time, render func(string) (*planspec.StepSpec, error)) (spec *planspec.StepSpec, ok bool) {
	spec = st.Steps[id]
	if render == nil || spec == nil || !hasTemplates(st, spec) {
		return spec, true
	}
	rendered, err := render(id)
	if err != nil {
		run := st.Run(id)
		msg := err.Error()
		run.Status, run.Phase, run.Error = planspec.StatusFailed, "", &msg
		run.Tries++
		run.LastRunIso = planspec.FormatISO(now)
		return spec, false
	}
	if rendered == spec || rendered.Title == spec.Title && rendered.Instruction == spec.Instruction &&
		rendered.Agent.Equal(spec.Agent) && rendered.AgentTemplate.Equal(spec.AgentTemplate) {
		return spec, true
	}
	st.ReplaceSpec(id, rendered)
	return rendered, true
}

// hasTemplates reports whether a try of the step renders something: its title,
// its instruction, its agent's arguments, or the plan's agent's that it runs.
func hasTemplates(st *planspec.State, spec *planspec.StepSpec) bool {
	return spec.InstructionTemplate != "" || spec.TitleTemplate != "" || !plan.AgentTemplateOf(spec, st.Settings.Agent).IsZero()
}

// runnerDecision is the original runner's choice: the step at the cursor, whatever
// its status, after stepDelayMinutes for a retry.
// A template of the step that fails to evaluate fails its try (changed) and
// nothing runs.
func runnerDecision(st *planspec.State, now time.Time, render func(string) (*planspec.StepSpec, error)) (d Decision, ok, changed bool) {
	if st.CurrentStep >= len(st.StepQueue) {
		return Decision{}, false, false
	}
	id := st.StepQueue[st.CurrentStep]
	run := st.Run(id)
	if d, waits := approvalGate(st, id, st.Steps[id], run); waits {
		return d, true, false
	}
	if at, ok := readyAt(st, id); ok && now.Before(at) {
		return Decision{Action: Delayed, Step: id, At: at, Reason: "runner: stepDelayMinutes"}, true, false
	}
	if b, over := BudgetReached(st, id, now); over {
		return Decision{Action: OverBudget, Step: id, Reason: b.Text()}, true, false
	}
	before := st.Steps[id]
	spec, ok := renderTry(st, id, now, render)
	if !ok {
		return Decision{}, false, true
	}
	return Decision{Action: Launch, Step: id, Prompt: Prompt(id, spec, run), Reason: "runner: current step"}, true, spec != before
}
