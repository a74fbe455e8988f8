package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// StatusReport is a state as a person asks about it: every step's status, tries
// and duration, the blockers, and what the plan waits for. `stepseq status --json`
// prints it as it is, so its JSON names are part of the command's output.
type StatusReport struct {
	Plan   string `json:"plan"`
	State  string `json:"state"`
	Status string `json:"status"`
	// Run is where the run stands in the word every face says it, stepseq
	// runs too: active, blocked or done (core.RunWord). Status is
	// state.json's own word, IN_PROGRESS for a blocked run as for an active one.
	Run        string       `json:"run"`
	Cursor     int          `json:"cursor"`
	Steps      []StepReport `json:"steps"`
	Blockers   []string     `json:"blockers"`
	WaitingFor Waiting      `json:"waitingFor"`
	// Runner is the live stepseq holding the workspace (a sidecar, a check);
	// nil when none does, and nothing moves the plan until one runs.
	Runner *Runner `json:"runner"`
	// Params are the run's params; absent for a plan without them.
	Params map[string]any `json:"params,omitempty"`
	// Summary is what the plan's summary gave when it ended; absent before, and
	// for a plan without one.
	Summary map[string]any `json:"summary,omitempty"`
	// Progress is where the step at the cursor stands in its loop, "round 2/5,
	// step 1/3"; absent outside a loop. Loops are the plan's repeat groups.
	Progress string       `json:"progress,omitempty"`
	Loops    []LoopReport `json:"loops,omitempty"`
	// Graph says the plan's steps run side by side, as their needs allow;
	// Running are the steps whose agents run now, in queue order.
	Graph   bool     `json:"graph,omitempty"`
	Running []string `json:"running,omitempty"`
	// Sandbox says which steps run sandboxed and which edit unattended without
	// a sandbox; absent when no step does either.
	Sandbox *SandboxView `json:"sandbox,omitempty"`
	// Spend is what the run spent and may spend; Workspace what every run of
	// the workspace spent, absent when this run is its only one.
	Spend     *SpendReport    `json:"spend,omitempty"`
	Workspace *planspec.Spend `json:"workspace,omitempty"`
}

// LoopReport is a repeat group and where its loop stands.
type LoopReport struct {
	Group string   `json:"group"`
	Title string   `json:"title,omitempty"`
	Steps []string `json:"steps"`
	// Round is the round under way (0 before the loop starts), Max its rounds.
	Round int `json:"round"`
	Max   int `json:"max"`
	// Rounds counts the finished rounds, those kept and those dropped.
	Rounds int `json:"rounds"`
	// Ended is exit, max or abort once the loop is over, Reason why.
	Ended  string `json:"ended,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Totals are the group's running totals over the finished rounds.
	Totals map[string]any `json:"totals,omitempty"`
}

// loopReports are st's groups and their loops.
func loopReports(st *planspec.State) []LoopReport {
	var out []LoopReport
	for _, g := range st.Settings.Groups {
		lr := LoopReport{Group: g.ID, Title: g.Title, Steps: g.Steps}
		if l := st.Loop(g.ID); l != nil {
			lr.Round, lr.Max, lr.Rounds, lr.Ended, lr.Reason = l.Round, l.Max, len(l.Rounds)+l.Dropped, l.Ended, l.Reason
			lr.Totals = l.Totals
		}
		out = append(out, lr)
	}
	return out
}

// Runner is the stepseq process that holds a workspace's lock.
type Runner struct {
	PID   int    `json:"pid"`
	Kind  string `json:"kind"` // watch (a sidecar), check, step or mcp
	Since string `json:"since"`
}

// liveRunner reads the workspace lock's holder without taking the lock, and
// returns it when that process lives.
func liveRunner(ws store.Workspace) *Runner {
	h := store.ReadHolder(ws)
	if h.PID <= 0 {
		return nil
	}
	if err := unix.Kill(h.PID, 0); err != nil && !errors.Is(err, unix.EPERM) {
		return nil
	}
	return &Runner{PID: h.PID, Kind: h.Kind, Since: h.Since}
}

// StepReport is one step's line. Missing values are null rather than absent, so
// that every step has the same keys.
type StepReport struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Status string `json:"status"`
	Tries  int    `json:"tries"`
	// MaxTries is how many tries the step gets before it blocks the plan: the
	// step's retries, else the plan's maxRetries, else STEP_MAX_RETRIES (3), plus
	// any granted by stepseq retry. The count of tries, as the original counts it.
	MaxTries   int     `json:"maxTries"`
	LastRunIso *string `json:"lastRunIso"`
	// DurationMs is the last try's run time: from the agent's start to its end, or
	// to now while it runs.
	DurationMs *int64  `json:"durationMs"`
	Running    bool    `json:"running,omitempty"` // its agent runs now
	Error      *string `json:"error"`
	Skipped    bool    `json:"skipped"`
	// Phase is where the step stands in the workflow protocol, as a
	// person reads it: a dispatched step of a plan without reports is "running",
	// a step the plan reached that may not start yet "waiting".
	Phase string `json:"phase"`
	// Waits is what a waiting step waits for: its `when:`, the plan's
	// stepDelayMinutes, a usage limit's reset.
	Waits string `json:"waits,omitempty"`
	// Errors are the failed tries' errors, oldest first: error is only the last.
	Errors []planspec.TryError `json:"errors"`
	// LastReport is the worker's newest accepted report, if any.
	LastReport *LastReport `json:"lastReport,omitempty"`
	// Logs are the tries' output files that exist, oldest try first.
	Logs []TryLogPath `json:"logs"`
	// Progress is where the step stands in its loop: "round 2/5, step 1/3".
	Progress string `json:"progress,omitempty"`
	// Result is the step's kept result (steps.ID.result): its done report's,
	// or the one its resultFrom gave.
	Result any `json:"result,omitempty"`
	// Needs are the steps this one waits for, in a plan whose steps run side
	// by side; Of is the foreach step an instance belongs to.
	Needs []string `json:"needs,omitempty"`
	Of    string   `json:"of,omitempty"`
	// Branch is the git branch of a step that runs in a worktree, once made.
	Branch string `json:"branch,omitempty"`
	// Spend is what the step's tries spent, every run of the step counted;
	// Usage the newest tries' own figures ("unknown" when the agent said
	// none); Budget the step's own.
	Spend  *planspec.Spend     `json:"spend,omitempty"`
	Usage  []planspec.TryUsage `json:"usage,omitempty"`
	Budget *planspec.Budget    `json:"budget,omitempty"`
}

// TryLogPath is where one try's output is: `stepseq logs STEP --try N` prints it.
type TryLogPath struct {
	Try  int    `json:"try"`
	Path string `json:"path"`
}

// Waiting is what the plan waits for: the reconcile core's decision on a copy of
// the state, in words.
type Waiting struct {
	// Action is the decision's name as the journal writes it: idle (DONE, or no
	// plan yet), launch, gated, delayed, blocked, running, waiting (a usage
	// limit) or awaiting_approval (a gate waits for a person's yes); "invalid" when a condition the core
	// evaluates or one of the step it stops at does not compile, or an `on` glob
	// leaves the workspace; "cannot-launch" when the step is due but its agent
	// cannot start (LaunchError says why).
	Action         string   `json:"action"`
	LaunchError    string   `json:"launchError,omitempty"`
	Step           string   `json:"step,omitempty"`
	Reason         string   `json:"reason"`
	At             string   `json:"at,omitempty"` // delayed: when the step may start
	MissingOutputs []string `json:"missingOutputs,omitempty"`
}

// Describe reports st as of now. What the plan waits for comes from the reconcile
// core run on a copy: the report says what the next pass would do, and changes
// nothing, neither st nor the workspace. When the conditions it compiles do not
// (see Waiting.Action), the report is still whole, with the "invalid" action, and
// the error is returned beside it.
func Describe(rt *Runtime, st *planspec.State, now time.Time, maxRetries int) (StatusReport, error) {
	return describe(rt, st, now, maxRetries, (*planspec.State).Clone)
}

// DescribeOwned is Describe for a caller that gives st up: the reconcile core runs
// on st itself rather than on a copy, which on a big state saves encoding and
// parsing it again. st must not be used afterwards.
func DescribeOwned(rt *Runtime, st *planspec.State, now time.Time, maxRetries int) (StatusReport, error) {
	return describe(rt, st, now, maxRetries, func(st *planspec.State) *planspec.State { return st })
}

// describe is Describe with the reconcile core run on scratch(st).
func describe(rt *Runtime, st *planspec.State, now time.Time, maxRetries int, scratch func(*planspec.State) *planspec.State) (StatusReport, error) {
	r := StatusReport{
		Plan: st.Settings.Name, State: rt.WS.State, Status: st.Status, Run: core.RunWord(st), Cursor: st.CurrentStep, Params: st.Settings.Params, Summary: st.Settings.SummaryValues,
		Steps: make([]StepReport, 0, len(st.StepQueue)), Blockers: append([]string{}, st.Blockers...),
		Loops: loopReports(st),
	}
	if st.CurrentStep < len(st.StepQueue) {
		r.Progress = st.Progress(st.StepQueue[st.CurrentStep])
	}
	var x *planspec.GraphIndex
	if r.Graph = st.IsGraph(); r.Graph {
		x = st.Index()
	}
	for _, id := range st.StepQueue {
		s := StepReport{ID: id, Status: planspec.StatusPending, Logs: []TryLogPath{}, Phase: core.DisplayPhase(st, id), Errors: []planspec.TryError{},
			MaxTries: core.RetryLimit(st, id, maxRetries), Progress: st.Progress(id)}
		if spec := st.Steps[id]; spec != nil {
			s.Title = spec.Title
		}
		graphStep(&s, x, st, id)
		if run := st.StepRuns[id]; run != nil {
			s.Status, s.Tries, s.Error, s.Skipped = run.Status, run.Tries, run.Error, run.Skipped
			if len(run.Result) > 0 {
				_ = json.Unmarshal(run.Result, &s.Result) // the state holds it as JSON
			}
			if n := len(run.Reports); n > 0 {
				s.LastReport = lastReport(run.Reports[n-1])
			}
			if run.Agent != nil && len(run.Agent.Errors) > 0 {
				s.Errors = run.Agent.Errors
			}
			stepSpend(&s, st, id, run)
			if run.LastRunIso != "" {
				last := run.LastRunIso // a copy: the reconcile core may change run
				s.LastRunIso = &last
			}
			for try := 1; try <= run.Tries; try++ {
				if p := rt.WS.LogPath(id, try); fileExists(p) {
					s.Logs = append(s.Logs, TryLogPath{Try: try, Path: p})
				}
			}
			if d, running, ok := runDuration(run, now); ok {
				ms := d.Milliseconds()
				s.DurationMs, s.Running = &ms, running
			}
			if run.Status == planspec.StatusInProgress && !st.IsPull(id) && !stillRunning(rt.WS, id, run) {
				// Its agent is gone (a Ctrl-C, a crash): nothing runs, and the
				// next pass starts the try again without spending one.
				s.DurationMs, s.Running, s.Phase = nil, false, PhaseInterrupted
			}
		}
		if s.Running {
			r.Running = append(r.Running, id)
		}
		r.Steps = append(r.Steps, s)
	}
	r.Runner = liveRunner(rt.WS)
	if v := SandboxNotes(st, rt.Sandbox, rt.getenv()); !v.Empty() {
		r.Sandbox = &v
	}
	r.Spend = spendReport(st, now)
	r.Workspace = workspaceSpend(rt.WS)
	var (
		held map[string]string
		err  error
	)
	r.WaitingFor, held, err = waitsHeld(rt, st, now, maxRetries, scratch)
	markWaiting(r.Steps, held)
	return r, err
}

// runDuration is how long the last try ran: from the agent's start to its finish,
// or to now while the step is IN_PROGRESS. ok is false when stepseq recorded no
// start (a state the original scripts wrote).
func runDuration(run *planspec.StepRun, now time.Time) (d time.Duration, running, ok bool) {
	if run.Agent == nil || run.Agent.StartedIso == "" {
		return 0, false, false
	}
	start, err := planspec.ParseISO(run.Agent.StartedIso)
	if err != nil {
		return 0, false, false
	}
	end := now
	switch {
	case run.Agent.FinishedIso != "":
		if end, err = planspec.ParseISO(run.Agent.FinishedIso); err != nil {
			return 0, false, false
		}
	case run.Status == planspec.StatusInProgress:
		running = true
	default:
		return 0, false, false
	}
	return max(end.Sub(start), 0), running, true
}

func waitsFor(rt *Runtime, st *planspec.State, now time.Time, maxRetries int) (Waiting, error) {
	return waitsOn(rt, st, now, maxRetries, (*planspec.State).Clone)
}

// waitsOn is waitsFor with the reconcile core run on scratch(st).
func waitsOn(rt *Runtime, st *planspec.State, now time.Time, maxRetries int, scratch func(*planspec.State) *planspec.State) (Waiting, error) {
	w, _, err := waitsHeld(rt, st, now, maxRetries, scratch)
	return w, err
}

// waitsHeld is waitsOn, and what each step held back before its start waits
// for (heldWords), by step id.
func waitsHeld(rt *Runtime, st *planspec.State, now time.Time, maxRetries int, scratch func(*planspec.State) *planspec.State) (Waiting, map[string]string, error) {
	if st.IsGraph() {
		return graphWaits(rt, st, now, maxRetries, scratch)
	}
	if st.Status != planspec.StatusDone && st.CurrentStep < len(st.StepQueue) {
		id := st.StepQueue[st.CurrentStep]
		if run := st.StepRuns[id]; run != nil && run.Status == planspec.StatusInProgress && stillRunning(rt.WS, id, run) {
			return withMissing(rt, st, Waiting{Action: core.Running.String(), Step: id,
				Reason: fmt.Sprintf("running (try %d)", run.Tries)}), nil, nil
		}
	}
	clone := scratch(st)
	invalid := Waiting{Action: "invalid", Reason: "the state's conditions or paths are not valid; nothing runs until they are fixed"}
	// Only the conditions of the steps the core reaches are compiled: on a big
	// state, compiling them all would be most of the cost of a report.
	conds, err := rt.lazyConditions(clone)
	if err != nil {
		return invalid, nil, err
	}
	d, _ := core.Reconcile(clone, core.Facts{Now: now, MaxRetries: maxRetries, Cond: func(id, kind string) (bool, error) { return conds.Cond(now, id, kind) }})
	if d.Step != "" {
		conds.compileStep(d.Step) // its check too: a pass would judge the try with it
	}
	if err := conds.Err(); err != nil {
		return invalid, nil, err
	}
	w := Waiting{Action: d.Action.String(), Step: d.Step, Reason: d.Reason}
	switch d.Action {
	case core.Idle:
		w.Reason = "plan DONE"
	case core.AwaitingApproval:
		w.Reason, w.At = gateReason(rt.WS.Run, d, now)
	case core.OverBudget:
		w.Reason = d.Reason + ": nothing launches until `stepseq budget` raises it"
	case core.LimitWaiting, core.Delayed:
		w.Reason, _ = heldWords(clone, d, now)
		w.At = planspec.FormatISO(d.At)
	case core.Launch:
		run := clone.Run(d.Step)
		try := run.Tries + 1
		switch {
		case d.Reoffer:
			try = run.Tries
			w.Reason = fmt.Sprintf("pulled: try %d is offered again to the next worker that calls step_current", run.Tries)
		case d.Interrupted:
			try = run.Tries
			w.Reason = fmt.Sprintf("interrupted: the agent of try %d is gone; the next check or sidecar pass starts it again", run.Tries)
		default:
			w.Reason = fmt.Sprintf("due: the next check or sidecar pass starts try %d", try)
		}
		if _, err := rt.resolveAgent(clone, d.Step); err != nil {
			w.Action, w.LaunchError = CannotLaunch, err.Error()
			w.Reason = fmt.Sprintf("unable to launch try %d: %v", try, err)
		}
	}
	var held map[string]string
	if words, ok := heldWords(clone, d, now); ok {
		held = map[string]string{d.Step: words}
	}
	return withMissing(rt, clone, w), held, nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// CannotLaunch is the Waiting action of a due step whose agent cannot start.
const CannotLaunch = "cannot-launch"

// ClockTime shows t in local time, as a person reads it: the time of day when it
// is today, else the date too.
func ClockTime(t, now time.Time) string {
	t, now = t.Local(), now.Local()
	switch {
	case t.YearDay() == now.YearDay() && t.Year() == now.Year():
		return t.Format("15:04:05")
	case t.Year() == now.Year():
		return t.Format("Jan 02 15:04")
	}
	return t.Format("2006-01-02 15:04")
}

// withMissing lists the required outputs of the step waited for that are not there.
func withMissing(rt *Runtime, st *planspec.State, w Waiting) Waiting {
	if w.Step == "" || w.Action == core.Idle.String() {
		return w
	}
	w.MissingOutputs = proc.MissingOutputs(st.Steps[w.Step], rt.Root())
	return w
}

// stillRunning reports whether an IN_PROGRESS step has something working on it. A
// run stepseq did not launch (no agent record: the original's runner) is taken at
// its word. Otherwise it is the agent holding the step's try lock, the agent
// recorded in the workspace lock, or a live
// stepseq holding the lock that has not recorded its agent yet or waits for the
// agent's outputs. It only reads the lock file: taking the lock, even briefly,
// would turn a sidecar starting at that moment away.
func stillRunning(ws store.Workspace, id string, run *planspec.StepRun) bool {
	if run.Agent == nil || run.Agent.StartedIso == "" {
		return true
	}
	if proc.ProbeTry(ws, id, run.Tries, run.Agent.StartedIso).Alive {
		return true // the try lock the agent holds, whoever launched it
	}
	h := store.ReadHolder(ws)
	if h.PID <= 0 {
		return false
	}
	if h.Agent != nil {
		return h.Agent.Step == id && proc.Alive(h.Agent.PID, h.Agent.StartTicks)
	}
	err := unix.Kill(h.PID, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// PhaseInterrupted is the phase status shows for an IN_PROGRESS step whose agent
// is gone: stepseq was stopped or killed while it ran, and the next check or
// sidecar pass runs the try again.
const PhaseInterrupted = "interrupted"

// LastReport is a worker's report as status shows it.
type LastReport struct {
	Time      string   `json:"time"`
	Try       int      `json:"try"`
	Via       string   `json:"via,omitempty"`
	Status    string   `json:"status"`
	Summary   string   `json:"summary"`
	Evidence  string   `json:"evidence"`
	Risk      string   `json:"risk"`
	Next      string   `json:"next"`
	Artifacts []string `json:"artifacts,omitempty"`
	Result    any      `json:"result,omitempty"`
}

func lastReport(r planspec.ReportRecord) *LastReport {
	out := &LastReport{Time: r.Time, Try: r.Try, Via: r.Via, Status: r.Status, Summary: r.Summary,
		Evidence: r.Evidence, Risk: r.Risk, Next: r.Next, Artifacts: r.Artifacts}
	if len(r.Result) > 0 {
		_ = json.Unmarshal(r.Result, &out.Result)
	}
	return out
}
