package core

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stepseq/stepseq/planspec"
	"github.com/stepseq/stepseq/planspec/plan"
)

var t0 = time.Date(2026, 2, 10, 21, 30, 31, 123456000, time.UTC)

// parse builds a state from JSON for the table tests.
func parse(t *testing.T, js string) *planspec.State {
	t.Helper()
	st, err := planspec.ParseState(strings.NewReader(js), "state.json")
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return st
}

const twoSteps = `{"plan":{"steps":{"a":{"title":"A","instruction":"do a"},"b":{"title":"B","instruction":"do b"}}},
 "stepQueue":["a","b"],"currentStep":%d,"stepRuns":{%s},"stepDelayMinutes":%s,"blockers":[],"status":"%s"}`

func state(t *testing.T, cursor int, runs, delay, status string) *planspec.State {
	return parse(t, fmt.Sprintf(twoSteps, cursor, runs, delay, status))
}

func TestReconcile(t *testing.T) {
	tests := []struct {
		name       string
		st         func(t *testing.T) *planspec.State
		facts      Facts
		want       Action
		wantStep   string
		wantPrompt string
		wantCursor int
		wantStatus string
		wantBlock  []string
	}{
		{name: "plan DONE runs nothing",
			st:   func(t *testing.T) *planspec.State { return state(t, 0, "", "0", "DONE") },
			want: Idle, wantStatus: "DONE"},
		{name: "empty queue becomes DONE",
			st: func(t *testing.T) *planspec.State {
				return parse(t, `{"plan":{"steps":{}},"stepQueue":[],"currentStep":0,"status":"IN_PROGRESS"}`)
			},
			want: Idle, wantStatus: "DONE"},
		{name: "cursor past the end becomes DONE",
			st:   func(t *testing.T) *planspec.State { return state(t, 2, "", "0", "IN_PROGRESS") },
			want: Idle, wantCursor: 2, wantStatus: "DONE"},
		{name: "no run yet launches the instruction",
			st:   func(t *testing.T) *planspec.State { return state(t, 0, "", "0", "IN_PROGRESS") },
			want: Launch, wantStep: "a", wantPrompt: "do a", wantStatus: "IN_PROGRESS"},
		{name: "DONE advances and launches the next",
			st: func(t *testing.T) *planspec.State {
				return state(t, 0, `"a":{"status":"DONE","tries":1,"lastRunIso":"2026-02-10T21:00:00+00:00"}`, "0", "IN_PROGRESS")
			},
			want: Launch, wantStep: "b", wantPrompt: "do b", wantCursor: 1, wantStatus: "IN_PROGRESS"},
		{name: "IN_PROGRESS without stepseq's record runs again as the original does",
			st: func(t *testing.T) *planspec.State {
				return state(t, 0, `"a":{"status":"IN_PROGRESS","tries":1,"lastRunIso":"2026-02-10T21:00:00+00:00"}`, "0", "IN_PROGRESS")
			},
			want: Launch, wantStep: "a", wantPrompt: "do a", wantStatus: "IN_PROGRESS"},
		{name: "FAILED under the limit retries with the troubleshoot prompt",
			st: func(t *testing.T) *planspec.State {
				return state(t, 0, `"a":{"status":"FAILED","tries":2,"lastRunIso":"2026-02-10T21:00:00+00:00","error":"boom"}`, "0", "IN_PROGRESS")
			},
			facts: Facts{MaxRetries: 3}, want: Launch, wantStep: "a",
			wantPrompt: "Step a failed (tries: 2). Previous run ended with: boom. Please troubleshoot and retry: do a", wantStatus: "IN_PROGRESS"},
		{name: "FAILED with an empty error retries with the plain instruction",
			st: func(t *testing.T) *planspec.State {
				return state(t, 0, `"a":{"status":"FAILED","tries":1,"error":""}`, "0", "IN_PROGRESS")
			},
			facts: Facts{MaxRetries: 3}, want: Launch, wantStep: "a", wantPrompt: "do a", wantStatus: "IN_PROGRESS"},
		{name: "FAILED at the limit records the blocker",
			st: func(t *testing.T) *planspec.State {
				return state(t, 0, `"a":{"status":"FAILED","tries":3,"error":"boom"}`, "0", "IN_PROGRESS")
			},
			facts: Facts{MaxRetries: 3}, want: Blocked, wantStep: "a", wantStatus: "IN_PROGRESS",
			wantBlock: []string{"a: max retries (3) exceeded"}},
		{name: "STEP_MAX_RETRIES raises the limit",
			st: func(t *testing.T) *planspec.State {
				return state(t, 0, `"a":{"status":"FAILED","tries":3,"error":"boom"}`, "0", "IN_PROGRESS")
			},
			facts: Facts{MaxRetries: 5}, want: Launch, wantStep: "a",
			wantPrompt: "Step a failed (tries: 3). Previous run ended with: boom. Please troubleshoot and retry: do a", wantStatus: "IN_PROGRESS"},
		{name: "the step's retries override the default",
			st: func(t *testing.T) *planspec.State {
				return parse(t, `{"plan":{"steps":{"a":{"title":"A","instruction":"do a","retries":1}}},"stepQueue":["a"],
					"stepRuns":{"a":{"status":"FAILED","tries":1,"error":"x"}},"status":"IN_PROGRESS"}`)
			},
			facts: Facts{MaxRetries: 3}, want: Blocked, wantStep: "a", wantStatus: "IN_PROGRESS",
			wantBlock: []string{"a: max retries (1) exceeded"}},
		{name: "the plan's maxRetries override STEP_MAX_RETRIES",
			st: func(t *testing.T) *planspec.State {
				return parse(t, `{"plan":{"steps":{"a":{"title":"A","instruction":"do a"}}},"stepQueue":["a"],
					"stepRuns":{"a":{"status":"FAILED","tries":2,"error":"x"}},"status":"IN_PROGRESS","stepseq":{"maxRetries":2}}`)
			},
			facts: Facts{MaxRetries: 9}, want: Blocked, wantStep: "a", wantStatus: "IN_PROGRESS",
			wantBlock: []string{"a: max retries (2) exceeded"}},
		{name: "a blocker is recorded once",
			st: func(t *testing.T) *planspec.State {
				return parse(t, `{"plan":{"steps":{"a":{"title":"A","instruction":"do a"}}},"stepQueue":["a"],
					"stepRuns":{"a":{"status":"FAILED","tries":3,"error":"x"}},"blockers":["a: max retries (3) exceeded"],"status":"IN_PROGRESS"}`)
			},
			facts: Facts{MaxRetries: 3}, want: Blocked, wantStep: "a", wantStatus: "IN_PROGRESS",
			wantBlock: []string{"a: max retries (3) exceeded"}},
		{name: "a retry waits stepDelayMinutes after its last run",
			st: func(t *testing.T) *planspec.State {
				return state(t, 0, `"a":{"status":"FAILED","tries":1,"lastRunIso":"2026-02-10T21:30:00+00:00","error":"x"}`, "2", "IN_PROGRESS")
			},
			facts: Facts{MaxRetries: 3, Now: t0}, want: Delayed, wantStep: "a", wantStatus: "IN_PROGRESS"},
		{name: "a retry after the delay launches",
			st: func(t *testing.T) *planspec.State {
				return state(t, 0, `"a":{"status":"FAILED","tries":1,"lastRunIso":"2026-02-10T21:20:00+00:00","error":"x"}`, "2", "IN_PROGRESS")
			},
			facts: Facts{MaxRetries: 3, Now: t0}, want: Launch, wantStep: "a",
			wantPrompt: "Step a failed (tries: 1). Previous run ended with: x. Please troubleshoot and retry: do a", wantStatus: "IN_PROGRESS"},
		{name: "the first step starts without a delay",
			st:    func(t *testing.T) *planspec.State { return state(t, 0, "", "2", "IN_PROGRESS") },
			facts: Facts{Now: t0}, want: Launch, wantStep: "a", wantPrompt: "do a", wantStatus: "IN_PROGRESS"},
		{name: "a later step waits stepDelayMinutes after the previous one",
			st: func(t *testing.T) *planspec.State {
				return state(t, 0, `"a":{"status":"DONE","tries":1,"lastRunIso":"2026-02-10T21:29:31+00:00"}`, "1.5", "IN_PROGRESS")
			},
			facts: Facts{Now: t0}, want: Delayed, wantStep: "b", wantCursor: 1, wantStatus: "IN_PROGRESS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := tt.st(t)
			if tt.facts.Now.IsZero() {
				tt.facts.Now = t0
			}
			d, _ := Reconcile(st, tt.facts)
			if d.Action != tt.want || d.Step != tt.wantStep || d.Prompt != tt.wantPrompt {
				t.Errorf("decision = %v %q %q, want %v %q %q", d.Action, d.Step, d.Prompt, tt.want, tt.wantStep, tt.wantPrompt)
			}
			if st.CurrentStep != tt.wantCursor || st.Status != tt.wantStatus {
				t.Errorf("cursor, status = %d %s, want %d %s", st.CurrentStep, st.Status, tt.wantCursor, tt.wantStatus)
			}
			if strings.Join(st.Blockers, "|") != strings.Join(tt.wantBlock, "|") {
				t.Errorf("blockers = %q, want %q", st.Blockers, tt.wantBlock)
			}
		})
	}
}

func TestReconcile_DelayUntil(t *testing.T) {
	st := state(t, 0, `"a":{"status":"DONE","tries":1,"lastRunIso":"2026-02-10T21:29:31+00:00"}`, "1.5", "IN_PROGRESS")
	d, _ := Reconcile(st, Facts{Now: t0})
	want := time.Date(2026, 2, 10, 21, 31, 1, 0, time.UTC)
	if !d.At.Equal(want) {
		t.Errorf("At = %v, want %v", d.At, want)
	}
}

// TestReconcile_DelayClamped: a stepDelayMinutes past what time.Duration holds is
// the longest delay, not none, and the reason names the clamp.
func TestReconcile_DelayClamped(t *testing.T) {
	for _, delay := range []string{"1e9", "1e300"} {
		st := state(t, 0, `"a":{"status":"DONE","tries":1,"lastRunIso":"2026-02-10T21:29:31+00:00"}`, delay, "IN_PROGRESS")
		d, _ := Reconcile(st, Facts{Now: t0})
		want := time.Date(2026, 2, 10, 21, 29, 31, 0, time.UTC).Add(time.Duration(planspec.MaxDuration))
		if d.Action != Delayed || !d.At.Equal(want) || !strings.Contains(d.Reason, "clamped to 525600 minutes (365 days)") {
			t.Errorf("stepDelayMinutes %s: got %v at %v (%s), want Delayed at %v naming the clamp", delay, d.Action, d.At, d.Reason, want)
		}
	}
}

func TestReconcile_Interrupted(t *testing.T) {
	js := `"a":{"status":"IN_PROGRESS","tries":2,"lastRunIso":"2026-02-10T21:00:00+00:00","stepseq":{"startedIso":"2026-02-10T21:00:00+00:00"}}`
	t.Run("a live agent is waited for", func(t *testing.T) {
		st := state(t, 0, js, "0", "IN_PROGRESS")
		d, _ := Reconcile(st, Facts{Now: t0, Alive: func(string) bool { return true }})
		if d.Action != Running {
			t.Fatalf("action = %v, want running", d.Action)
		}
	})
	t.Run("a gone agent is relaunched without spending a try", func(t *testing.T) {
		st := state(t, 0, js, "5", "IN_PROGRESS")
		d, _ := Reconcile(st, Facts{Now: t0, MaxRetries: 3, Alive: func(string) bool { return false }})
		if d.Action != Launch || !d.Interrupted {
			t.Fatalf("decision = %+v, want an interrupted launch with no delay", d)
		}
		if !strings.HasPrefix(d.Prompt, "Step a failed (tries: 2). Previous run ended with: Interrupted:") {
			t.Errorf("prompt = %q", d.Prompt)
		}
		if got := BeginTry(st, "a", t0, d.Interrupted); got != 2 {
			t.Errorf("try = %d, want 2 (interruptions do not count)", got)
		}
		if st.Run("a").Agent.Interruptions != 1 {
			t.Errorf("interruptions = %d, want 1", st.Run("a").Agent.Interruptions)
		}
	})
}

func TestBeginTry(t *testing.T) {
	st := parse(t, `{"plan":{"steps":{"a":{"title":"A","instruction":"do a"}}},"stepQueue":["a"],
		"stepRuns":{"a":{"status":"FAILED","tries":3,"error":"x","stdout":"y","mine":1}},"blockers":["a: max retries (3) exceeded","other"],"status":"IN_PROGRESS"}`)
	if got := BeginTry(st, "a", t0, false); got != 4 {
		t.Fatalf("try = %d, want 4", got)
	}
	r := st.Run("a")
	if r.Status != planspec.StatusInProgress || r.Tries != 4 || r.LastRunIso != "2026-02-10T21:30:31.123456+00:00" || r.Error != nil || r.Stdout != nil {
		t.Errorf("run = %+v", r)
	}
	if strings.Join(st.Blockers, "|") != "other" {
		t.Errorf("blockers = %q: a reset step's blocker must go", st.Blockers)
	}
	if !strings.Contains(string(st.Marshal()), `"mine": 1`) {
		t.Errorf("unknown run key lost:\n%s", st.Marshal())
	}
}

func TestPrompt_Troubleshoot(t *testing.T) {
	e := "Missing required outputs: a.md, b.md"
	got := Prompt("research", &planspec.StepSpec{Instruction: "Research X"}, &planspec.StepRun{Tries: 1, Error: &e})
	want := "Step research failed (tries: 1). Previous run ended with: Missing required outputs: a.md, b.md. Please troubleshoot and retry: Research X"
	if got != want {
		t.Errorf("prompt =\n%q\nwant\n%q", got, want)
	}
}

// TestReconcile_PulledTryOfferedAgain: a pulled try that was on offer when
// stepseq stopped was not interrupted (no process of it ran): it is offered
// again under its own number, with the prompt it had (the troubleshoot prompt of
// the try before), the worker's accepted standing, and no interruption counted.
func TestReconcile_PulledTryOfferedAgain(t *testing.T) {
	p, err := plan.ParsePlan(strings.NewReader("agent: mcp\nsteps:\n  - id: a\n    title: A\n    instruction: do a\n"), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st := p.State("plans/p.yaml", "h")
	run := st.Run("a")
	run.Status, run.Tries, run.Error = planspec.StatusFailed, 1, new("exit 3")
	run.Agent = &planspec.AgentRecord{StartedIso: "2026-02-10T21:00:00+00:00", Errors: []planspec.TryError{{Try: 1, Error: "exit 3"}}}
	d, _ := Reconcile(st, Facts{Now: t0, MaxRetries: 3})
	if d.Action != Launch || d.Reoffer {
		t.Fatalf("decision = %+v, want a new try", d)
	}
	want := d.Prompt
	if BeginTry(st, "a", t0, false) != 2 {
		t.Fatal("want try 2")
	}
	run.Phase = planspec.PhaseInProgress // the worker accepted; then stepseq stopped
	d, _ = Reconcile(st, Facts{Now: t0.Add(time.Hour), MaxRetries: 3, Alive: func(string) bool { return false }})
	if d.Action != Launch || !d.Reoffer || d.Interrupted {
		t.Fatalf("decision = %+v, want the try offered again", d)
	}
	if d.Prompt != want || !strings.Contains(want, "exit 3") {
		t.Errorf("prompt = %q, want the try's own %q", d.Prompt, want)
	}
	if got := ReofferTry(st, "a", t0.Add(time.Hour)); got != 2 {
		t.Errorf("try = %d, want 2", got)
	}
	if run := st.Run("a"); run.Agent.Interruptions != 0 || run.Error != nil || run.Phase != planspec.PhaseInProgress {
		t.Errorf("after the offer: interruptions %d, error %v, phase %s; want 0, none, in_progress", run.Agent.Interruptions, run.Error, run.Phase)
	}
}
