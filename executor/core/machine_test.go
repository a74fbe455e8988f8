package core

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stepseq/stepseq/planspec"
	planpkg "github.com/stepseq/stepseq/planspec/plan"
)

// The state machine without processes, files or sleeps: a fake Probe answers what
// the machine asks of the world, and the rig answers its writes and reads the way a
// driver does, collecting every effect.

type fakeProbe struct {
	missing   map[string]bool
	launchErr error
	lastOut   time.Time
	mtimes    map[string]time.Time
}

type fakeConds struct{ check func() (bool, error) }

func (c fakeConds) Cond(_ time.Time, id, kind string) (bool, error) { return kind == "when", nil }
func (c fakeConds) Check(time.Time, string) func() (bool, error)    { return c.check }
func (fakeConds) Reads(string) ([]string, []string, bool)           { return nil, nil, false }

func (p *fakeProbe) Conditions(*planspec.State) (CondSet, error) { return fakeConds{}, nil }
func (p *fakeProbe) Missing(paths []string) []string {
	var out []string
	for _, x := range paths {
		if p.missing[x] {
			out = append(out, x)
		}
	}
	return out
}
func (p *fakeProbe) ModTime(rel string) (time.Time, bool) { t, ok := p.mtimes[rel]; return t, ok }
func (p *fakeProbe) Orphan(string, int, string) TryState  { return TryState{} }
func (p *fakeProbe) CanLaunch(*planspec.State, string) error {
	return p.launchErr
}
func (p *fakeProbe) LastOutput() time.Time { return p.lastOut }
func (p *fakeProbe) WatchSet(*planspec.State, CondSet) ([]string, []string) {
	return []string{"state.json"}, nil
}
func (p *fakeProbe) ReportsDir(id string) string { return reportsRel(id) }

type rig struct {
	t         *testing.T
	m         *Machine
	p         *fakeProbe
	now       time.Time
	effects   []Effect // every effect since the last take
	writes    int
	failWrite error
	disk      []byte // what the last successful write put on disk
}

func newRig(t *testing.T, stateJSON string, persistent bool) *rig {
	t.Helper()
	r := &rig{t: t, p: &fakeProbe{missing: map[string]bool{}, mtimes: map[string]time.Time{}}, now: t0}
	r.m = NewMachine(MachineConfig{Driver: "test", MaxRetries: 3, Persistent: persistent, Probe: r.p})
	r.feed(StateRead{State: parse(t, stateJSON)})
	return r
}

// feed hands the machine one input and answers its writes and reads as a driver.
func (r *rig) feed(in Input) {
	r.t.Helper()
	queue := r.m.Handle(r.now, in)
	for len(queue) > 0 {
		e := queue[0]
		queue = queue[1:]
		r.effects = append(r.effects, e)
		switch e := e.(type) {
		case WriteState:
			r.writes++
			if r.failWrite == nil {
				r.disk = e.State.Marshal()
			}
			queue = append(queue, r.m.Handle(r.now, Written{Err: r.failWrite})...)
		case ReadState:
			queue = append(queue, r.m.Handle(r.now, StateRead{Unchanged: true})...)
		}
	}
}

// take returns the effects collected so far and forgets them.
func (r *rig) take() []Effect {
	out := r.effects
	r.effects = nil
	return out
}

func (r *rig) at(d time.Duration) { r.now = t0.Add(d) }

func (r *rig) run(id string) *planspec.StepRun { return r.m.State().Run(id) }

// started is the StartAgent among effects, if any.
func started(effs []Effect) (StartAgent, bool) {
	for _, e := range effs {
		if s, ok := e.(StartAgent); ok {
			return s, true
		}
	}
	return StartAgent{}, false
}

func notes(effs []Effect) []string {
	var out []string
	for _, e := range effs {
		if n, ok := e.(Notify); ok {
			out = append(out, n.Note.Status)
		}
	}
	return out
}

// noteEvents are the notifications' status/event pairs.
func noteEvents(effs []Effect) []string {
	var out []string
	for _, e := range effs {
		if n, ok := e.(Notify); ok {
			out = append(out, n.Note.Status+"/"+n.Note.Event)
		}
	}
	return out
}

func verdictOf(effs []Effect) (ReportVerdict, bool) {
	for _, e := range effs {
		if v, ok := e.(ReportVerdict); ok {
			return v, true
		}
	}
	return ReportVerdict{}, false
}

func timerAt(effs []Effect) (time.Time, bool) {
	var at time.Time
	found := false
	for _, e := range effs {
		if s, ok := e.(SetTimer); ok {
			at, found = s.At, true
		}
	}
	return at, found
}

// verdictError is the error of the last verdict among effs ("" for DONE).
func verdictError(t *testing.T, effs []Effect) string {
	t.Helper()
	v := journal(effs, "verdict")
	if len(v) == 0 {
		t.Fatalf("no verdict among %v", effs)
	}
	e, _ := v[len(v)-1].Detail["error"].(string)
	return e
}

func journal(effs []Effect, event string) []Entry {
	var out []Entry
	for _, e := range effs {
		if j, ok := e.(JournalEntry); ok && j.Entry.Event == event {
			out = append(out, j.Entry)
		}
	}
	return out
}

func planAB(extra string) string {
	return `{"plan":{"steps":{
		"a":{"title":"A","instruction":"do a","requiredOutputs":["a.txt"]},
		"b":{"title":"B","instruction":"do b"}}},
	"stepQueue":["a","b"],"currentStep":0,"stepRuns":{},"stepDelayMinutes":0,"blockers":[],"status":"IN_PROGRESS"` + extra + `}`
}

func good(rep planspec.WorkerReport) planspec.WorkerReport {
	if rep.Summary == "" {
		rep.Summary = "working on it"
	}
	if rep.Evidence == "" {
		rep.Evidence = "opened a.txt"
	}
	if rep.Risk == "" {
		rep.Risk = "low — a small change"
	}
	if rep.Next == "" {
		rep.Next = "write a.txt"
	}
	return rep
}

func TestMachine_LaunchFollowsTheWriteThatRecordsIt(t *testing.T) {
	r := newRig(t, planAB(""), false)
	effs := r.take()
	var order []string
	for _, e := range effs {
		switch e := e.(type) {
		case WriteState:
			order = append(order, "write")
		case StartAgent:
			order = append(order, "start "+e.Step)
		}
	}
	if !slices.Equal(order, []string{"write", "start a"}) {
		t.Fatalf("order = %v, want a write then the start", order)
	}
	if run := r.run("a"); run.Status != planspec.StatusInProgress || run.Tries != 1 || run.Phase != planspec.PhaseDispatching {
		t.Fatalf("run = %+v, want IN_PROGRESS, try 1, dispatching", run)
	}
	if got := notes(effs); !slices.Equal(got, []string{planspec.PhaseDispatching}) {
		t.Errorf("notes = %v", got)
	}
	// exit 0 with the output present: DONE, then b at once, in one more write.
	r.feed(AgentExited{Step: "a", Try: 1, Exit: Exit{Code: 0}})
	effs = r.take()
	if run := r.run("a"); run.Status != planspec.StatusDone || run.Phase != planspec.PhaseDone {
		t.Fatalf("a = %+v, want DONE", run)
	}
	if s, ok := started(effs); !ok || s.Step != "b" {
		t.Fatalf("next start = %+v, want b", s)
	}
	if r.writes != 2 {
		t.Errorf("writes = %d, want 2: the verdict of a and the start of b are one write", r.writes)
	}
}

func TestMachine_NoLaunchTheDiskDoesNotRecord(t *testing.T) {
	r := &rig{t: t, p: &fakeProbe{missing: map[string]bool{}}, now: t0, failWrite: errors.New("no space left on device")}
	r.m = NewMachine(MachineConfig{Driver: "test", MaxRetries: 3, Persistent: true, Probe: r.p})
	r.feed(StateRead{State: parse(t, planAB(""))})
	effs := r.take()
	if _, ok := started(effs); ok {
		t.Fatal("an agent started although its try was never written")
	}
	at, ok := timerAt(effs)
	if !ok || !at.After(t0) {
		t.Fatalf("no retry timer for the write: %v", effs)
	}
	if n := len(journal(effs, "write-error")); n != 1 {
		t.Errorf("write-error entries = %d, want 1 (said once)", n)
	}
	// Still failing at the retry: nothing starts, nothing said again.
	r.now = at
	r.feed(TimerFired{})
	effs = r.take()
	if _, ok := started(effs); ok || len(journal(effs, "write-error")) != 0 {
		t.Fatalf("second failure: %v", effs)
	}
	// Space is back: a file event is enough; the write lands, then the agent starts.
	r.failWrite = nil
	r.feed(FilesChanged{Paths: []string{"x"}})
	effs = r.take()
	if s, ok := started(effs); !ok || s.Step != "a" || s.Try != 1 {
		t.Fatalf("after space returned: %v", effs)
	}
	if st, _ := planspec.ParseState(strings.NewReader(string(r.disk)), "disk"); st.Run("a").Tries != 1 {
		t.Errorf("disk says tries %d", st.Run("a").Tries)
	}
}

func TestMachine_ConfigErrorStartsNothing(t *testing.T) {
	r := &rig{t: t, p: &fakeProbe{launchErr: &ConfigError{Msg: "STEP_AGENT_CMD is not set"}}, now: t0}
	r.m = NewMachine(MachineConfig{Driver: "check", MaxRetries: 3, Probe: r.p})
	r.feed(StateRead{State: parse(t, planAB(""))})
	if _, ok := started(r.take()); ok || r.writes != 0 {
		t.Fatalf("started or wrote (%d) on a configuration error", r.writes)
	}
	if !errors.Is(r.m.Err(), ErrConfig) || !r.m.Settled() {
		t.Fatalf("err %v, settled %v", r.m.Err(), r.m.Settled())
	}
}

func TestMachine_TriggerBurstIsOneRerun(t *testing.T) {
	r := newRig(t, planAB(`,"x":1`), true)
	r.feed(AgentExited{Step: "a", Try: 1, Exit: Exit{Code: 0}})
	r.feed(AgentExited{Step: "b", Try: 1, Exit: Exit{Code: 0}})
	if r.m.State().Status != planspec.StatusDone {
		t.Fatal("plan not DONE")
	}
	r.take()
	writes := r.writes
	var ts []Trigger
	for i := range 10000 {
		step := "b"
		if i == 5000 {
			step = "a"
		}
		ts = append(ts, Trigger{Step: step, From: "hook"})
	}
	r.feed(TriggersIn{Triggers: ts})
	effs := r.take()
	if got := journal(effs, "trigger"); len(got) != 1 || got[0].Step != "a" || got[0].Detail["count"] != 10000 {
		t.Fatalf("trigger entries = %+v, want one re-run from a counting 10000", got)
	}
	if r.writes-writes != 1 {
		t.Errorf("writes = %d, want 1", r.writes-writes)
	}
	if s, ok := started(effs); !ok || s.Step != "a" {
		t.Errorf("start = %+v, want a", s)
	}
}

func TestMachine_AwaitOutputs(t *testing.T) {
	r := newRig(t, `{"plan":{"steps":{"a":{"title":"A","instruction":"x","requiredOutputs":["a.txt"],"awaitOutputs":"10m"}}},
		"stepQueue":["a"],"currentStep":0,"stepRuns":{},"stepDelayMinutes":0,"blockers":[],"status":"IN_PROGRESS"}`, true)
	r.p.missing["a.txt"] = true
	r.take()
	r.at(time.Minute)
	r.feed(AgentExited{Step: "a", Try: 1, Exit: Exit{Code: 0, Ended: t0.Add(time.Minute)}})
	effs := r.take()
	if at, _ := timerAt(effs); !at.Equal(t0.Add(11 * time.Minute)) {
		t.Fatalf("timer %v, want the awaitOutputs deadline", at)
	}
	if r.run("a").Status != planspec.StatusInProgress {
		t.Fatal("judged before the outputs came")
	}
	r.p.missing["a.txt"] = false
	r.at(2 * time.Minute)
	r.feed(FilesChanged{Paths: []string{"a.txt"}})
	if r.run("a").Status != planspec.StatusDone {
		t.Fatalf("a = %+v after its output appeared", r.run("a"))
	}
	// The deadline passing without the output fails the try.
	r2 := newRig(t, `{"plan":{"steps":{"a":{"title":"A","instruction":"x","requiredOutputs":["a.txt"],"awaitOutputs":"10m"}}},
		"stepQueue":["a"],"currentStep":0,"stepRuns":{},"stepDelayMinutes":0,"blockers":[],"status":"IN_PROGRESS"}`, true)
	r2.p.missing["a.txt"] = true
	r2.feed(AgentExited{Step: "a", Try: 1, Exit: Exit{Code: 0, Ended: t0}})
	r2.at(10 * time.Minute)
	r2.feed(TimerFired{})
	if e := verdictError(t, r2.take()); e != "Missing required outputs: a.txt" {
		t.Fatalf("verdict %q, want FAILED on the missing output", e)
	}
}

func TestMachine_StepRemovedWhileItRan(t *testing.T) {
	r := newRig(t, planAB(""), true)
	st := parse(t, `{"plan":{"steps":{"b":{"title":"B","instruction":"do b"}}},"stepQueue":["b"],"currentStep":0,"stepRuns":{},"stepDelayMinutes":0,"blockers":[],"status":"IN_PROGRESS"}`)
	r.take()
	queue := r.m.Handle(r.now, AgentExited{Step: "a", Try: 1, Exit: Exit{Code: 0}})
	if !slices.ContainsFunc(queue, func(e Effect) bool { _, ok := e.(ReadState); return ok }) {
		t.Fatal("the state is not read again after an exit")
	}
	r.feed(StateRead{State: st})
	effs := r.take()
	if len(journal(effs, "dropped")) != 1 {
		t.Fatalf("no dropped entry: %v", effs)
	}
	if _, ok := r.m.State().StepRuns["a"]; ok {
		t.Error("a run record for a step no longer in the plan")
	}
}

// TestMachine_Reports is every report status in every phase: accepted or refused,
// and where it leads.
func TestMachine_Reports(t *testing.T) {
	phases := []string{planspec.PhaseDispatching, planspec.PhaseInProgress, planspec.PhaseBlocked, planspec.PhaseReviewing}
	want := map[string]map[string]string{ // status → phase → the phase after, "" refused
		planspec.ReportAccepted:  {planspec.PhaseDispatching: planspec.PhaseInProgress, planspec.PhaseBlocked: planspec.PhaseInProgress},
		planspec.ReportMilestone: {planspec.PhaseInProgress: planspec.PhaseInProgress, planspec.PhaseBlocked: planspec.PhaseInProgress},
		planspec.ReportBlocked:   {planspec.PhaseDispatching: planspec.PhaseBlocked, planspec.PhaseInProgress: planspec.PhaseBlocked},
		planspec.ReportDone:      {planspec.PhaseDispatching: planspec.PhaseReviewing, planspec.PhaseInProgress: planspec.PhaseReviewing, planspec.PhaseBlocked: planspec.PhaseReviewing},
	}
	for status, to := range want {
		for _, phase := range phases {
			t.Run(status+"/"+phase, func(t *testing.T) {
				r := newRig(t, planAB(`,"stepseq":{"reports":"required"}`), true)
				r.run("a").Phase = phase
				r.take()
				r.feed(ReportIn{Step: "a", Try: 1, Report: good(planspec.WorkerReport{Status: status}), Via: "test", Ref: "r"})
				effs := r.take()
				v, ok := verdictOf(effs)
				if !ok {
					t.Fatal("no verdict")
				}
				if to[phase] == "" {
					if v.Accepted || len(v.Reasons) != 1 {
						t.Fatalf("verdict %+v, want one refusal", v)
					}
					if r.run("a").Phase != phase {
						t.Errorf("phase moved to %s on a refused report", r.run("a").Phase)
					}
					return
				}
				if !v.Accepted {
					t.Fatalf("refused: %v", v.Reasons)
				}
				if got := r.run("a").Phase; got != to[phase] {
					t.Errorf("phase %s, want %s", got, to[phase])
				}
				if n := len(r.run("a").Reports); n != 1 {
					t.Errorf("reports kept: %d", n)
				}
				entries := 1
				if status == planspec.ReportDone && phase == planspec.PhaseDispatching {
					entries = 2 // the accept it stands for, then the done
				}
				if len(journal(effs, "report")) != entries || len(notes(effs)) != entries {
					t.Errorf("want %d journal entries and notifications: %v", entries, effs)
				}
			})
		}
	}
}

func TestMachine_ReportRefusals(t *testing.T) {
	cases := []struct {
		name string
		in   ReportIn
		want []string
	}{
		{"every missing field", ReportIn{Step: "a", Report: planspec.WorkerReport{Status: "accepted"}},
			[]string{"missing summary", "missing evidence", "missing risk", "missing next"}},
		{"a bad risk", ReportIn{Step: "a", Report: good(planspec.WorkerReport{Status: "accepted", Risk: "dunno"})},
			[]string{`risk "dunno": start with none, low, medium or high`}},
		{"a stale try", ReportIn{Step: "a", Try: 7, Report: good(planspec.WorkerReport{Status: "accepted"})},
			[]string{"stale: try 7 of step a is over; the current try is 1"}},
		{"a step not running", ReportIn{Step: "b", Report: good(planspec.WorkerReport{Status: "accepted"})},
			[]string{"stale: step b has no try running now"}},
		{"a file older than the try", ReportIn{Step: "a", Written: t0.Add(-time.Hour), Report: good(planspec.WorkerReport{Status: "accepted"})},
			[]string{"stale: written before try 1 of step a started"}},
		{"done before accepted, its artifact missing", ReportIn{Step: "a", Report: good(planspec.WorkerReport{Status: "done", Artifacts: []string{"gone.md"}})},
			[]string{"artifacts not found in the workspace: gone.md"}},
		{"an unknown status and a missing summary", ReportIn{Step: "a", Report: planspec.WorkerReport{Status: "finished", Evidence: "e", Risk: "none", Next: "none"}},
			[]string{"missing summary", `status: want accepted, milestone, blocked or done, got "finished"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, planAB(""), true)
			r.p.missing["gone.md"] = true
			r.take()
			r.feed(c.in)
			v, _ := verdictOf(r.take())
			if v.Accepted {
				t.Fatal("accepted")
			}
			all := strings.Join(v.Reasons, "\n")
			for _, w := range c.want {
				if !strings.Contains(all, w) {
					t.Errorf("reasons %q lack %q", v.Reasons, w)
				}
			}
			if len(v.Reasons) != len(c.want) {
				t.Errorf("reasons %q, want %d of them", v.Reasons, len(c.want))
			}
		})
	}
}

func TestMachine_DoneNeedsVerification(t *testing.T) {
	r := newRig(t, planAB(`,"stepseq":{"reports":"required"}`), true)
	r.feed(ReportIn{Step: "a", Report: good(planspec.WorkerReport{Status: "accepted"})})
	r.feed(ReportIn{Step: "a", Report: good(planspec.WorkerReport{Status: "done", Artifacts: []string{"notes.md"}})})
	if r.run("a").Phase != planspec.PhaseReviewing {
		t.Fatalf("phase %s after done", r.run("a").Phase)
	}
	// The worker says done, but the output and the artifact it named are gone by exit.
	r.p.missing["a.txt"], r.p.missing["notes.md"] = true, true
	r.take()
	r.feed(AgentExited{Step: "a", Try: 1, Exit: Exit{Code: 0}})
	effs := r.take()
	if e := verdictError(t, effs); e != "Missing required outputs: a.txt; Missing reported artifacts: notes.md" {
		t.Fatalf("verdict %q, want FAILED naming both", e)
	}
	// The troubleshoot prompt of the next try names the reasons.
	s, ok := started(effs)
	if !ok || !strings.Contains(s.Prompt, "Missing reported artifacts: notes.md") {
		t.Fatalf("next prompt %q", s.Prompt)
	}
}

func TestMachine_RequiredReportsTimers(t *testing.T) {
	plan := planAB(`,"stepseq":{"reports":"required","launchTimeout":"2m","milestoneTimeout":"5m"}`)

	t.Run("exit 0 without done fails", func(t *testing.T) {
		r := newRig(t, plan, true)
		r.feed(ReportIn{Step: "a", Report: good(planspec.WorkerReport{Status: "accepted"})})
		r.take()
		r.feed(AgentExited{Step: "a", Try: 1, Exit: Exit{Code: 0}})
		if e := verdictError(t, r.take()); !strings.Contains(e, "without a done report") {
			t.Fatalf("error %q", e)
		}
	})

	t.Run("launch timeout", func(t *testing.T) {
		r := newRig(t, plan, true)
		at, _ := timerAt(r.take())
		if !at.Equal(t0.Add(2 * time.Minute)) {
			t.Fatalf("timer %v, want the launch timeout", at)
		}
		r.now = at
		r.feed(TimerFired{})
		effs := r.take()
		if !slices.ContainsFunc(effs, func(e Effect) bool { s, ok := e.(StopAgent); return ok && s.Step == "a" }) {
			t.Fatalf("no stop: %v", effs)
		}
		r.feed(AgentExited{Step: "a", Try: 1, Exit: Exit{Code: -1}})
		effs = r.take()
		if e := verdictError(t, effs); e != "launch timeout: no accepted report in 2m" {
			t.Fatalf("error %q", e)
		}
		if s, ok := started(effs); !ok || s.Try != 2 {
			t.Errorf("retry: %+v", s)
		}
	})

	t.Run("milestone timeout blocks once, a report clears it", func(t *testing.T) {
		r := newRig(t, plan, true)
		r.at(time.Minute)
		r.feed(ReportIn{Step: "a", Report: good(planspec.WorkerReport{Status: "accepted"})})
		at, _ := timerAt(r.take())
		if !at.Equal(t0.Add(6 * time.Minute)) {
			t.Fatalf("timer %v, want the milestone timeout", at)
		}
		r.now = at
		r.feed(TimerFired{})
		effs := r.take()
		if r.run("a").Phase != planspec.PhaseBlocked || !slices.Contains(r.m.State().Blockers, "a: no report for 5m (milestone timeout)") {
			t.Fatalf("phase %s, blockers %q", r.run("a").Phase, r.m.State().Blockers)
		}
		if got := notes(effs); !slices.Equal(got, []string{planspec.PhaseBlocked}) {
			t.Errorf("notes %v, want blocked at once", got)
		}
		r.at(20 * time.Minute)
		r.feed(TimerFired{})
		if n := len(journal(r.take(), "timeout")); n != 0 {
			t.Errorf("blocked again: %d", n)
		}
		r.feed(ReportIn{Step: "a", Report: good(planspec.WorkerReport{Status: "milestone"})})
		if r.run("a").Phase != planspec.PhaseInProgress || len(r.m.State().Blockers) != 0 {
			t.Fatalf("phase %s, blockers %q after a milestone", r.run("a").Phase, r.m.State().Blockers)
		}
	})

	t.Run("idle timeout on any plan", func(t *testing.T) {
		r := newRig(t, planAB(`,"stepseq":{"idleTimeout":"3m"}`), true)
		r.p.lastOut = t0.Add(2 * time.Minute)
		r.at(3 * time.Minute)
		r.feed(TimerFired{})
		if r.run("a").Phase == planspec.PhaseBlocked {
			t.Fatal("blocked although output came 1m ago")
		}
		r.at(5 * time.Minute)
		r.feed(TimerFired{})
		if r.run("a").Phase != planspec.PhaseBlocked {
			t.Fatalf("phase %s, want blocked after 3m without output", r.run("a").Phase)
		}
	})
}

func TestMachine_BlockedReportHoldsThePlanUntilRetry(t *testing.T) {
	r := newRig(t, planAB(""), true)
	r.take()
	r.feed(ReportIn{Step: "a", Report: good(planspec.WorkerReport{Status: "accepted"})})
	r.feed(ReportIn{Step: "a", Report: good(planspec.WorkerReport{Status: "blocked", Summary: "no credentials", Next: "put a token in .env"})})
	r.feed(AgentExited{Step: "a", Try: 1, Exit: Exit{Code: 0}})
	effs := r.take()
	if _, ok := started(effs); ok {
		t.Fatal("a blocked step was retried by itself")
	}
	if d := r.m.Decision(); d.Action != Blocked {
		t.Fatalf("decision %v, want blocked", d.Action)
	}
	if !slices.Contains(noteEvents(effs), "blocked/"+EventPlanBlocked) {
		t.Errorf("notes %v", noteEvents(effs))
	}
	r.feed(TriggersIn{Triggers: []Trigger{{Step: "a", From: "retry", Retry: true}}})
	s, ok := started(r.take())
	if !ok || s.Try != 2 || !strings.Contains(s.Prompt, "next: put a token in .env") || !strings.HasPrefix(s.Prompt, "Step a failed (tries: 1).") {
		t.Fatalf("retry start %+v", s)
	}
	if n := strings.Count(s.Prompt, "put a token in .env"); n != 1 {
		t.Errorf("the blocker's next is %d times in the retry prompt, want once: %q", n, s.Prompt)
	}
	if len(r.m.State().Blockers) != 0 {
		t.Errorf("blockers %q after retry", r.m.State().Blockers)
	}
}

func TestMachine_RetryGrantsATryPastTheLimit(t *testing.T) {
	r := newRig(t, planAB(""), true)
	for try := 1; try <= 3; try++ {
		r.feed(AgentExited{Step: "a", Try: try, Exit: Exit{Code: 1, Stderr: "boom"}})
	}
	if !slices.Contains(r.m.State().Blockers, "a: max retries (3) exceeded") {
		t.Fatalf("blockers %q", r.m.State().Blockers)
	}
	r.take()
	r.feed(TriggersIn{Triggers: []Trigger{{Step: "a", From: "retry", Retry: true}}})
	if s, ok := started(r.take()); !ok || s.Try != 4 {
		t.Fatalf("start %+v, want try 4", s)
	}
}

func TestMachine_HeartbeatEveryMinute(t *testing.T) {
	r := newRig(t, planAB(`,"stepseq":{"heartbeat":"1m"}`), true)
	r.feed(ReportIn{Step: "a", Report: good(planspec.WorkerReport{Status: "accepted"})})
	r.take()
	for i := 1; i <= 3; i++ {
		r.at(time.Duration(i) * time.Minute)
		r.feed(TimerFired{})
		if got := notes(r.take()); !slices.Equal(got, []string{"heartbeat"}) {
			t.Fatalf("minute %d: notes %v", i, got)
		}
	}
	// Something new resets it.
	r.at(3*time.Minute + 30*time.Second)
	r.feed(ReportIn{Step: "a", Report: good(planspec.WorkerReport{Status: "milestone"})})
	r.take()
	r.at(4 * time.Minute)
	r.feed(TimerFired{})
	if got := notes(r.take()); len(got) != 0 {
		t.Errorf("heartbeat 30s after a milestone: %v", got)
	}
}

func TestMachine_InvalidStateIsReadAgainThenLeft(t *testing.T) {
	r := newRig(t, planAB(""), true)
	r.take()
	bad := errors.New("torn")
	r.feed(StateRead{Err: bad})
	for i := 0; i < stateReread; i++ {
		at, ok := timerAt(r.take())
		if !ok {
			t.Fatalf("re-read %d: no timer", i)
		}
		r.now = at
		q := r.m.Handle(r.now, TimerFired{})
		if !slices.ContainsFunc(q, func(e Effect) bool { _, ok := e.(ReadState); return ok }) {
			t.Fatalf("re-read %d: no read asked", i)
		}
		r.feed(StateRead{Err: bad})
	}
	effs := r.take()
	if len(journal(effs, "state-invalid")) != 1 {
		t.Fatalf("want one state-invalid entry: %v", effs)
	}
	for _, e := range effs {
		if _, ok := e.(WriteState); ok {
			t.Fatal("wrote over a state that does not parse")
		}
	}
}

func TestChoosePlans(t *testing.T) {
	valid := func(name, hash string) PlanFile {
		return PlanFile{Path: "/ws/plans/" + name + ".yaml", Source: "plans/" + name + ".yaml", Name: name, Hash: hash, Plan: &planpkg.Plan{Settings: planspec.Settings{Name: name}}}
	}
	invalid := PlanFile{Path: "/ws/plans/bad.yaml", Source: "plans/bad.yaml", Name: "bad", Hash: "hbad", Err: errors.New("bad")}
	cases := []struct {
		name    string
		files   []PlanFile
		recs    map[string]PlanRecord
		seen    map[string]string
		active  ActivePlan
		busy    bool
		apply   string
		again   bool // apply is the active plan run again as new
		edit    string
		updates []string // name:status
	}{
		{name: "first plan applied", files: []PlanFile{valid("a", "h1"), valid("b", "h2")},
			apply: "a", updates: []string{"a:waiting", "b:waiting", "b:waiting"}},
		{name: "a plan in progress: the new one waits", files: []PlanFile{valid("b", "h2")},
			active: ActivePlan{Present: true, Source: "plans/a.yaml", Hash: "h1"}, updates: []string{"b:waiting", "b:waiting"}},
		{name: "a try in flight: waits", files: []PlanFile{valid("b", "h2")}, busy: true,
			active: ActivePlan{Present: true, Done: true}, updates: []string{"b:waiting", "b:waiting"}},
		{name: "an edit of the active plan", files: []PlanFile{valid("a", "h9")}, seen: map[string]string{"/ws/plans/a.yaml": "h1"},
			active: ActivePlan{Present: true, Source: "plans/a.yaml", Hash: "h1"}, edit: "a", updates: []string{"a:waiting", "a:active"}},
		{name: "applied before: never twice", files: []PlanFile{valid("a", "h1")},
			recs:   map[string]PlanRecord{"a": {Status: PlanFinished, AppliedHash: "h1"}},
			active: ActivePlan{Present: true, Done: true}, updates: []string{"a:finished"}},
		{name: "the finished active plan's record is closed", files: []PlanFile{valid("a", "h1"), valid("b", "h2")},
			seen:   map[string]string{"/ws/plans/a.yaml": "h1", "/ws/plans/b.yaml": "h2"},
			recs:   map[string]PlanRecord{"a": {Status: PlanActive, AppliedHash: "h1"}},
			active: ActivePlan{Present: true, Source: "plans/a.yaml", Hash: "h1", Done: true}, apply: "b", updates: []string{"a:finished"}},
		{name: "an invalid file is recorded once", files: []PlanFile{invalid}, updates: []string{"bad:invalid"}},
		{name: "the active plan's content back after an invalid edit", files: []PlanFile{valid("a", "h1")},
			seen:   map[string]string{"/ws/plans/a.yaml": "hbad"},
			recs:   map[string]PlanRecord{"a": {Status: PlanInvalid, AppliedHash: "h1"}},
			active: ActivePlan{Present: true, Source: "plans/a.yaml", Hash: "h1"}, updates: []string{"a:active"}},
		{name: "an invalid file already judged", files: []PlanFile{invalid}, seen: map[string]string{"/ws/plans/bad.yaml": "hbad"}},
		{name: "the active plan's state removed: applied again as new", files: []PlanFile{valid("a", "h1")},
			seen:   map[string]string{"/ws/plans/a.yaml": "h1"},
			recs:   map[string]PlanRecord{"a": {Status: PlanActive, AppliedHash: "h1"}},
			active: ActivePlan{Missing: true}, apply: "a", again: true},
		{name: "a fresh workspace: the first plan is not run again", files: []PlanFile{valid("a", "h1")},
			active: ActivePlan{Missing: true}, apply: "a", updates: []string{"a:waiting"}},
		{name: "the active plan's state removed, its try still in flight: its record stays", files: []PlanFile{valid("a", "h1")},
			seen:   map[string]string{"/ws/plans/a.yaml": "h1"},
			recs:   map[string]PlanRecord{"a": {Status: PlanActive, AppliedHash: "h1"}},
			active: ActivePlan{Missing: true}, busy: true},
		{name: "a finished plan's state removed: not run again", files: []PlanFile{valid("a", "h1")},
			seen:   map[string]string{"/ws/plans/a.yaml": "h1"},
			recs:   map[string]PlanRecord{"a": {Status: PlanFinished, AppliedHash: "h1"}},
			active: ActivePlan{Missing: true}},
		// A stepseq killed after it wrote the state and before the plan's record.
		{name: "the state is the plan applied: its record is missing", files: []PlanFile{valid("a", "h1")},
			active: ActivePlan{Present: true, Source: "plans/a.yaml", Hash: "h1", Done: true}, updates: []string{"a:finished"}},
		{name: "the state is the plan applied: its record is an older content's", files: []PlanFile{valid("a", "h2")},
			recs:   map[string]PlanRecord{"a": {Status: PlanFinished, AppliedHash: "h1"}},
			active: ActivePlan{Present: true, Source: "plans/a.yaml", Hash: "h2", Done: true}, updates: []string{"a:finished"}},
		{name: "the state is the plan in progress: its record is missing", files: []PlanFile{valid("a", "h1")},
			active: ActivePlan{Present: true, Source: "plans/a.yaml", Hash: "h1"}, updates: []string{"a:active"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.recs == nil {
				c.recs = map[string]PlanRecord{}
			}
			if c.seen == nil {
				c.seen = map[string]string{}
			}
			got := ChoosePlans(c.files, c.recs, c.seen, c.active, c.busy)
			name := func(pf *PlanFile) string {
				if pf == nil {
					return ""
				}
				return pf.Name
			}
			if name(got.Apply) != c.apply || name(got.Edit) != c.edit {
				t.Errorf("apply %q edit %q, want %q %q", name(got.Apply), name(got.Edit), c.apply, c.edit)
			}
			if got.Again != c.again {
				t.Errorf("again %v, want %v", got.Again, c.again)
			}
			var ups []string
			for _, u := range got.Updates {
				ups = append(ups, fmt.Sprintf("%s:%s", u.File.Name, u.Status))
				if c.active.Present && c.active.Source == u.File.Source && c.active.Hash == u.File.Hash && u.Applied != u.File.Hash {
					t.Errorf("%s's record would say applied %q; the state holds %q", u.File.Name, u.Applied, u.File.Hash)
				}
			}
			if !slices.Equal(ups, c.updates) {
				t.Errorf("updates %v, want %v", ups, c.updates)
			}
		})
	}
}

// gatedConds keeps every gate shut: each decision runs the whole core and waits.
type gatedConds struct{}

func (gatedConds) Cond(_ time.Time, id, kind string) (bool, error) { return false, nil }
func (gatedConds) Check(time.Time, string) func() (bool, error)    { return nil }
func (gatedConds) Reads(string) ([]string, []string, bool)         { return nil, nil, false }

type gatedProbe struct{ fakeProbe }

func (p *gatedProbe) Conditions(*planspec.State) (CondSet, error) { return gatedConds{}, nil }

// BenchmarkMachine_Decision is one input and the decision it leads to, over a
// 1,000-step state whose cursor is half way, with no I/O.
func BenchmarkMachine_Decision(b *testing.B) {
	const n = 1000
	var sb strings.Builder
	sb.WriteString(`{"plan":{"steps":{`)
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `"s%d":{"title":"S","instruction":"do %d","requiredOutputs":["out/%d.txt"],"when":"exists(\"go\")","on":["in/%d/*.md"]}`, i, i, i, i)
	}
	sb.WriteString(`}},"stepQueue":[`)
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `"s%d"`, i)
	}
	sb.WriteString(`],"currentStep":500,"stepRuns":{`)
	for i := range 500 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `"s%d":{"status":"DONE","tries":1,"lastRunIso":"2026-02-10T12:00:00.000000+00:00","phase":"done"}`, i)
	}
	sb.WriteString(`},"stepDelayMinutes":0,"blockers":[],"status":"IN_PROGRESS"}`)
	st, err := planspec.ParseState(strings.NewReader(sb.String()), "bench")
	if err != nil {
		b.Fatal(err)
	}
	p := &gatedProbe{fakeProbe{missing: map[string]bool{}, mtimes: map[string]time.Time{}}}
	m := NewMachine(MachineConfig{Driver: "bench", MaxRetries: 3, Persistent: true, Probe: p})
	m.Handle(t0, StateRead{State: st})
	in := FilesChanged{Paths: []string{"notes/x.md"}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		m.Handle(t0.Add(time.Duration(i)), in)
	}
	b.StopTimer()
	if d := m.Decision(); d.Action != Gated || d.Step != "s500" {
		b.Fatalf("decision %v on %s, want gated on s500", d.Action, d.Step)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/decision")
}

func TestCoalesceTriggers(t *testing.T) {
	st := parse(t, `{"plan":{"steps":{"a":{"title":"A","instruction":"x"},"b":{"title":"B","instruction":"x"},"c":{"title":"C","instruction":"x"}}},
		"stepQueue":["a","b","c"],"currentStep":3,"stepRuns":{},"stepDelayMinutes":0,"blockers":[],"status":"DONE"}`)
	cases := []struct {
		name  string
		ts    []Trigger
		rerun string
		count int
		retry []string
		unk   []string
	}{
		{"none", nil, "", 0, nil, nil},
		{"a handed-over check asks for a pass only", []Trigger{{From: "check"}}, "", 0, nil, nil},
		{"the earliest step wins whatever the order", []Trigger{{Step: "c"}, {Step: "a"}, {Step: "b"}}, "a", 3, nil, nil},
		{"a later step does not move past an earlier one", []Trigger{{Step: "a"}, {Step: "c"}}, "a", 2, nil, nil},
		{"retries stand apart, in order", []Trigger{{Step: "b", Retry: true}, {Step: "c"}, {Step: "a", Retry: true}}, "c", 1, []string{"b", "a"}, nil},
		{"unknown steps are named once", []Trigger{{Step: "zz"}, {Step: "zz"}, {Step: "b"}}, "b", 1, nil, []string{"zz"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := CoalesceTriggers(st, c.ts)
			var retries []string
			for _, r := range b.Retries {
				retries = append(retries, r.Step)
			}
			if b.Rerun != c.rerun || b.Count != c.count || !slices.Equal(retries, c.retry) || !slices.Equal(b.Unknown, c.unk) {
				t.Errorf("got %+v, want rerun %q count %d retries %v unknown %v", b, c.rerun, c.count, c.retry, c.unk)
			}
		})
	}
}

// A re-run of a later step never moves the cursor past an earlier step still to
// run: two triggers one after the other do what one burst does.
func TestRerun_NeverSkipsAhead(t *testing.T) {
	st := parse(t, `{"plan":{"steps":{"a":{"title":"A","instruction":"x"},"b":{"title":"B","instruction":"x"},"c":{"title":"C","instruction":"x"}}},
		"stepQueue":["a","b","c"],"currentStep":3,"stepRuns":{"a":{"status":"DONE","tries":1},"b":{"status":"DONE","tries":1},"c":{"status":"DONE","tries":1}},"stepDelayMinutes":0,"blockers":[],"status":"DONE"}`)
	for _, id := range []string{"a", "c"} {
		if err := Rerun(st, id); err != nil {
			t.Fatal(err)
		}
	}
	if st.CurrentStep != 0 {
		t.Fatalf("cursor %d after re-running a then c, want 0", st.CurrentStep)
	}
	if st.Run("a").Status != planspec.StatusPending {
		t.Errorf("a = %s, want PENDING", st.Run("a").Status)
	}
}

// A persistent machine's watch set is the plan's and the running step's report
// folder: the first is whole, then each step's folder comes and goes as deltas
// (a's goes when a is recorded, b's comes once the record is written and b
// starts), and an input that changes neither emits nothing.
func TestMachine_WatchDeltas(t *testing.T) {
	// deltas checks that every watch set among effs is a delta, and returns the
	// last one's paths and what they added and removed in all.
	deltas := func(effs []Effect) (paths, added, removed []string) {
		t.Helper()
		for _, e := range effs {
			w, ok := e.(SetWatch)
			if !ok {
				continue
			}
			if !w.Delta {
				t.Fatalf("a whole watch set within one plan: %+v", w)
			}
			paths, added, removed = w.Paths, append(added, w.Added...), append(removed, w.Removed...)
		}
		return paths, added, removed
	}
	ra, rb := reportsRel("a"), reportsRel("b")
	r := newRig(t, planAB(""), true)
	var first []SetWatch
	for _, e := range r.take() {
		if w, ok := e.(SetWatch); ok {
			first = append(first, w)
		}
	}
	if len(first) != 1 || first[0].Delta || !slices.Equal(first[0].Paths, []string{ra, "state.json"}) {
		t.Fatalf("first watch set %+v; want whole: %s and state.json", first, ra)
	}
	r.at(time.Second)
	r.feed(TimerFired{})
	if paths, _, _ := deltas(r.take()); paths != nil {
		t.Errorf("an input that changes nothing set the watches to %v", paths)
	}
	r.feed(AgentExited{Step: "a", Try: 1, Exit: Exit{Code: 0}})
	paths, added, removed := deltas(r.take())
	// a's folder stays watched while b runs: a report dropped there after a's
	// try is over is judged, refused as stale.
	if !slices.Equal(paths, []string{ra, rb, "state.json"}) || !slices.Equal(added, []string{rb}) || len(removed) != 0 {
		t.Fatalf("step b: paths %v, added %v, removed %v; want b's folder beside a's", paths, added, removed)
	}
	r.feed(AgentExited{Step: "b", Try: 1, Exit: Exit{Code: 0}})
	paths, added, removed = deltas(r.take())
	if !slices.Equal(paths, []string{rb, "state.json"}) || len(added) != 0 || !slices.Equal(removed, []string{ra}) {
		t.Fatalf("the plan's end: paths %v, added %v, removed %v; want a's folder gone, b's kept", paths, added, removed)
	}
}

// A report timer's blocker is about an agent that went silent: once the agent has
// exited, the blocker goes with it, whatever the verdict; a plan that ends DONE
// keeps none.
func TestMachine_TimeoutBlockerEndsWithItsTry(t *testing.T) {
	for _, tc := range []struct {
		name string
		exit Exit
		want string // the step's status after the exit
	}{
		{"the try succeeds", Exit{Code: 0}, planspec.StatusDone},
		{"the try fails", Exit{Code: 1, Stderr: "boom"}, planspec.StatusInProgress},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, planAB(`,"stepseq":{"idleTimeout":"3m"}`), true)
			r.at(5 * time.Minute)
			r.feed(TimerFired{})
			if r.run("a").Phase != planspec.PhaseBlocked || len(r.m.State().Blockers) != 1 {
				t.Fatalf("phase %s, blockers %q: want the idle timeout's block", r.run("a").Phase, r.m.State().Blockers)
			}
			r.take()
			r.feed(AgentExited{Step: "a", Try: 1, Exit: tc.exit})
			if b := r.m.State().Blockers; len(b) != 0 {
				t.Errorf("blockers %q after the agent exited", b)
			}
			if r.run("a").Phase == planspec.PhaseBlocked {
				t.Errorf("phase still blocked after the agent exited")
			}
			if tc.want == planspec.StatusDone {
				r.feed(AgentExited{Step: "b", Try: 1, Exit: Exit{Code: 0}})
				if st := r.m.State(); st.Status != planspec.StatusDone || len(st.Blockers) != 0 {
					t.Errorf("plan %s with blockers %q", st.Status, st.Blockers)
				}
			} else if s, ok := started(r.take()); !ok || s.Step != "a" || s.Try != 2 {
				t.Errorf("start %+v, want a's retry", s)
			}
		})
	}
}

// An on: re-run is told the files whose change matched its globs: not the folders
// the change made, the state file or the batch's other files. It is a new run of
// the step, from try 1, not a resumed try.
func TestMachine_OnRerunNamesOnlyTheMatchingFiles(t *testing.T) {
	r := newRig(t, `{"plan":{"steps":{"a":{"title":"A","instruction":"x","on":["notes/**/*.md"]},"b":{"title":"B","instruction":"y"}}},
		"stepQueue":["a","b"],"currentStep":2,"stepRuns":{
			"a":{"status":"DONE","tries":2,"lastRunIso":"2026-02-10T11:00:00.000000+00:00","phase":"done"},
			"b":{"status":"DONE","tries":1,"lastRunIso":"2026-02-10T11:00:00.000000+00:00","phase":"done"}},
		"stepDelayMinutes":0,"blockers":[],"status":"DONE"}`, true)
	r.take()
	paths := []string{"notes", "notes/sub", "notes/sub/a.md", "state.json", "other.txt"}
	for _, p := range paths {
		r.p.mtimes[p] = t0 // a person's change: no agent ran then
	}
	r.feed(FilesChanged{Paths: paths})
	s, ok := started(r.take())
	if !ok || s.Step != "a" || s.Try != 1 {
		t.Fatalf("start %+v, want a's try 1", s)
	}
	if !slices.Equal(s.Changed, []string{"notes/sub/a.md"}) {
		t.Errorf("changed %q, want only notes/sub/a.md", s.Changed)
	}
	if s.Resumed {
		t.Error("a re-run's first try is a new try, not a resumed one")
	}
}

// A step DONE by its skip is told as any step's end: a notification, done with the
// event skipped, and a journal record.
func TestMachine_SkippedStepIsNotified(t *testing.T) {
	r := &rig{t: t, p: &fakeProbe{missing: map[string]bool{}, mtimes: map[string]time.Time{}}, now: t0}
	r.m = NewMachine(MachineConfig{Driver: "test", MaxRetries: 3, Persistent: true, Probe: &skipProbe{r.p}})
	r.feed(StateRead{State: parse(t, `{"plan":{"steps":{"a":{"title":"A","instruction":"x","skip":"true"},"b":{"title":"B","instruction":"y"}}},
		"stepQueue":["a","b"],"currentStep":0,"stepRuns":{},"stepDelayMinutes":0,"blockers":[],"status":"IN_PROGRESS"}`)})
	var got []Notification
	for _, e := range r.take() {
		if n, ok := e.(Notify); ok && n.Note.Step == "a" {
			got = append(got, n.Note)
		}
	}
	if len(got) != 1 || got[0].Status != planspec.PhaseDone || got[0].Event != "skipped" || !strings.Contains(got[0].Output, "skip: true") || got[0].Next != "step b" {
		t.Fatalf("a's notifications %+v, want one: done, event skipped", got)
	}
	if !r.run("a").Skipped {
		t.Error("a is not marked skipped")
	}
}

// skipProbe's conditions hold: every when, and a's skip.
type skipProbe struct{ *fakeProbe }

func (p *skipProbe) Conditions(*planspec.State) (CondSet, error) { return skipConds{}, nil }

type skipConds struct{}

func (skipConds) Cond(_ time.Time, id, kind string) (bool, error) {
	return kind == "when" || id == "a", nil
}
func (skipConds) Check(time.Time, string) func() (bool, error) { return nil }
func (skipConds) Reads(string) ([]string, []string, bool)      { return nil, nil, false }

// reportsRel is step id's report folder as the driver names it, for ids that
// need no escaping.
func reportsRel(id string) string { return MetaDir + "/reports/" + id }

// A notification carries the notify: list of the plan it is about, from the
// state the machine decided on: the notifier routes by it without reading the
// state file. A plan without a list says so with an empty one.
func TestMachine_NotificationCarriesPlanSinks(t *testing.T) {
	for _, c := range []struct {
		name, extra string
		want        []planspec.NotifySink
	}{
		{"listed", `,"stepseq":{"notify":[{"command":["notify-send","x"]},{"webhook":"https://ntfy.sh/t"}]}`,
			[]planspec.NotifySink{{Command: []string{"notify-send", "x"}}, {Webhook: "https://ntfy.sh/t"}}},
		{"none", "", []planspec.NotifySink{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, planAB(c.extra), false)
			var got []Notification
			for _, e := range r.take() {
				if n, ok := e.(Notify); ok {
					got = append(got, n.Note)
				}
			}
			if len(got) == 0 {
				t.Fatal("no notification")
			}
			for _, n := range got {
				if n.Sinks == nil || !slices.EqualFunc(n.Sinks, c.want, planspec.NotifySink.Equal) {
					t.Errorf("%s: sinks %#v, want %#v", n.Status, n.Sinks, c.want)
				}
			}
		})
	}
}

// A simple agent that reports only done, while its step is still dispatching,
// loses no try: the done stands for the accept too, the journal says the accept
// was implied, and the user hears in_progress twice (the accept, then the claim
// under review), never done before verification.
func TestMachine_DoneWhileDispatchingImpliesAccept(t *testing.T) {
	r := newRig(t, planAB(""), true)
	r.take()
	r.feed(ReportIn{Step: "a", Try: 1, Report: good(planspec.WorkerReport{Status: planspec.ReportDone}), Via: "test", Ref: "r"})
	effs := r.take()
	if v, ok := verdictOf(effs); !ok || !v.Accepted {
		t.Fatalf("verdict %+v, want accepted", v)
	}
	if got := r.run("a").Phase; got != planspec.PhaseReviewing {
		t.Errorf("phase %s, want reviewing", got)
	}
	reps := journal(effs, "report")
	if len(reps) != 2 || reps[0].Reason != planspec.ReportAccepted || reps[0].Detail["implied"] == nil || reps[1].Reason != planspec.ReportDone {
		t.Errorf("journal: %+v, want the implied accept, then the done", reps)
	}
	if got := noteEvents(effs); !slices.Equal(got, []string{"in_progress/" + EventAcceptImplied, "in_progress/" + EventReviewing}) {
		t.Errorf("notifications %v", got)
	}
}

// A try that fails its verification while the agent CLI's own permissions
// refused a tool (claude's permission_denials, with exit 0 and is_error
// false) says so in its error, after the verification's reasons.
func TestMachine_FailedTryNamesRefusedTools(t *testing.T) {
	r := newRig(t, planAB(""), true)
	r.p.missing["a.txt"] = true
	r.take()
	refused := "claude's --permission-mode acceptEdits refused: Bash(python3 gen.py)"
	r.feed(AgentExited{Step: "a", Try: 1, Exit: Exit{Code: 0}, Refused: refused})
	if e := verdictError(t, r.take()); e != "Missing required outputs: a.txt; "+refused {
		t.Fatalf("verdict %q, want the missing output and the refusal", e)
	}
}

// The step the cursor reached and that waits (here, stepDelayMinutes after a)
// holds its instruction rendered as soon as its inputs are known, not only when
// its try starts: the original runner resuming the run now sends plain text.
func TestMachine_RendersTheStepAtTheCursor(t *testing.T) {
	r := newRig(t, `{"plan":{"steps":{
		"a":{"title":"A","instruction":"do a"},
		"b":{"title":"B","instruction":"after a, which is ${steps.a.status}","instructionTemplate":"after a, which is ${steps.a.status}"}}},
	"stepQueue":["a","b"],"currentStep":1,"stepRuns":{"a":{"status":"DONE","tries":1,"lastRunIso":"`+planspec.FormatISO(t0)+`"}},
	"stepDelayMinutes":5,"blockers":[],"status":"IN_PROGRESS"}`, true)
	effs := r.take()
	if slices.ContainsFunc(effs, func(e Effect) bool { _, ok := e.(StartAgent); return ok }) {
		t.Fatal("b launched before its delay")
	}
	if got := r.m.State().Steps["b"].Instruction; got != "after a, which is DONE" {
		t.Errorf("b's instruction %q, want it rendered while b waits", got)
	}
	if !strings.Contains(string(r.disk), "after a, which is DONE") {
		t.Errorf("the state on disk does not hold b's rendered instruction:\n%s", r.disk)
	}
}
