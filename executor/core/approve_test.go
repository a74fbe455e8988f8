package core

import (
	"errors"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/planspec"
)

// TestCheckAnswer: an answer to a gate that waits is taken; the same answer
// again is an answer (again); an unknown step is ErrNoStep; a gate that does
// not wait is ErrNotWaiting, saying what the run waits for instead.
func TestCheckAnswer(t *testing.T) {
	read := func(t *testing.T, js string) *planspec.State {
		st, err := planspec.ParseState(strings.NewReader(js), "state.json")
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	const plan = `"plan":{"steps":{"a":{"title":"A","instruction":"do a"},"b":{"title":"B","instruction":"do b","approve":true}}},
		"stepQueue":["a","b"],"stepDelayMinutes":0,"blockers":[],"status":"IN_PROGRESS"`
	waiting := read(t, `{`+plan+`,"currentStep":1,"stepRuns":{"a":{"status":"DONE","tries":1},
		"b":{"status":"PENDING","tries":0,"phase":"awaiting_approval","approval":{"askedIso":"2026-02-10T21:30:31Z"}}}}`)
	approved := read(t, `{`+plan+`,"currentStep":1,"stepRuns":{"a":{"status":"DONE","tries":1},
		"b":{"status":"IN_PROGRESS","tries":1,"approval":{"askedIso":"2026-02-10T21:30:31Z","answer":"approved","by":"alice","face":"cli","atIso":"2026-02-10T21:31:00Z"}}}}`)
	running := read(t, `{`+plan+`,"currentStep":0,"stepRuns":{"a":{"status":"IN_PROGRESS","tries":1}}}`)
	yes, no := Answer{Approve: true, By: "u", Face: "cli"}, Answer{By: "u", Face: "cli", Note: "no"}
	for _, c := range []struct {
		name      string
		st        *planspec.State
		step      string
		a         Answer
		again     bool
		err       error
		saying    string
		wantGate  GateRef
		resolveOK bool
	}{
		{name: "waiting, named", st: waiting, step: "b", a: yes, wantGate: GateRef{Step: "b"}, resolveOK: true},
		{name: "waiting, unnamed", st: waiting, a: no, wantGate: GateRef{Step: "b"}, resolveOK: true},
		{name: "second yes", st: approved, step: "b", a: yes, again: true, wantGate: GateRef{Step: "b"}, resolveOK: true},
		{name: "no after yes", st: approved, step: "b", a: no, err: ErrNotWaiting, saying: "step b's gate was approved by alice (cli)", resolveOK: true},
		{name: "no gate", st: waiting, step: "a", a: yes, err: ErrNotWaiting, saying: "step a has no gate", resolveOK: true},
		{name: "not asked yet", st: running, step: "b", a: yes, err: ErrNotWaiting, saying: "the run waits for step a, running", resolveOK: true},
		{name: "nothing waits", st: running, a: yes, err: ErrNotWaiting, saying: "not awaiting approval: no gate waits for an answer; the run waits for step a"},
		{name: "unknown step", st: waiting, step: "zz", a: yes, err: ErrNoStep, saying: `no step "zz" in the plan (steps: a, b)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, err := ResolveGate(c.st, c.step)
			if !c.resolveOK {
				if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.saying) {
					t.Fatalf("ResolveGate: %v, want %v saying %q", err, c.err, c.saying)
				}
				return
			}
			if err != nil {
				t.Fatalf("ResolveGate: %v", err)
			}
			again, err := CheckAnswer(c.st, g, c.a)
			if c.err != nil {
				if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.saying) {
					t.Fatalf("CheckAnswer: %v, want %v saying %q", err, c.err, c.saying)
				}
				return
			}
			if err != nil || again != c.again || g != c.wantGate {
				t.Fatalf("CheckAnswer: gate %+v again %v err %v; want gate %+v again %v", g, again, err, c.wantGate, c.again)
			}
		})
	}
}
