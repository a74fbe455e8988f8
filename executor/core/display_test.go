package core

import (
	"fmt"
	"testing"

	"github.com/stepseq/stepseq/planspec"
)

// twoNames is a plan whose step b's id is the start of step build's.
const twoNames = `{"plan":{"steps":{"b":{"title":"B","instruction":"x"},"build":{"title":"Build","instruction":"y"}}},"stepQueue":["b","build"],"currentStep":0,"stepRuns":%s,"stepDelayMinutes":0,"blockers":%s,"status":"IN_PROGRESS"}`

func TestDisplayPhase(t *testing.T) {
	cases := []struct {
		name, runs, blockers, want string
	}{
		{"no record", `{}`, `[]`, "planned"},
		{"dispatched, no reports", `{"b":{"status":"IN_PROGRESS","tries":1,"phase":"dispatching"}}`, `[]`, "running"},
		{"accepted, no reports", `{"b":{"status":"IN_PROGRESS","tries":1,"phase":"in_progress"}}`, `[]`, "running"},
		{"a record the original wrote", `{"b":{"status":"IN_PROGRESS","tries":1}}`, `[]`, "running"},
		{"failed, retry due", `{"b":{"status":"FAILED","tries":1,"phase":"planned"}}`, `[]`, "failed"},
		{"blocked", `{"b":{"status":"FAILED","tries":1,"phase":"blocked"}}`, `[]`, "blocked"},
		{"the original's blocked record", `{"b":{"status":"FAILED","tries":3}}`, `["b: max retries (3) exceeded"]`, "failed"},
		{"the original's failed record, another step's blocker", `{"b":{"status":"FAILED","tries":1}}`, `["build: max retries (3) exceeded"]`, "failed"},
		{"done", `{"b":{"status":"DONE","tries":1}}`, `[]`, "done"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := parse(t, fmt.Sprintf(twoNames, c.runs, c.blockers))
			if got := DisplayPhase(st, "b"); got != c.want {
				t.Errorf("phase %q, want %q", got, c.want)
			}
			st.Settings.Reports = planspec.ReportsOptional
			if run := st.StepRuns["b"]; run != nil && run.Phase == planspec.PhaseDispatching {
				if got := DisplayPhase(st, "b"); got != planspec.PhaseDispatching {
					t.Errorf("with reports: %q, want dispatching", got)
				}
			}
		})
	}
}

// TestStepBlocker: a step's blocker is the one that begins with its id and a
// colon; step b never takes build's.
func TestStepBlocker(t *testing.T) {
	cases := []struct {
		name, blockers, step, want string
		ok                         bool
	}{
		{"none", `[]`, "b", "", false},
		{"its own", `["b: max retries (3) exceeded"]`, "b", "b: max retries (3) exceeded", true},
		{"another step's that begins with its id", `["build: max retries (3) exceeded"]`, "b", "", false},
		{"another step's that names it", `["build: blocked: waits for b"]`, "b", "", false},
		{"its own after another's", `["build: max retries (3) exceeded","b: blocked: no key"]`, "b", "b: blocked: no key", true},
		{"the longer id", `["b: blocked: no key","build: max retries (3) exceeded"]`, "build", "build: max retries (3) exceeded", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := parse(t, fmt.Sprintf(twoNames, `{}`, c.blockers))
			got, ok := StepBlocker(st, c.step)
			if got != c.want || ok != c.ok {
				t.Errorf("StepBlocker(%s) = %q, %v; want %q, %v", c.step, got, ok, c.want, c.ok)
			}
		})
	}
}
