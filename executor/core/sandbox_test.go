package core

import (
	"strings"
	"testing"
)

const sandboxSteps = `{"plan":{"steps":{
  "a":{"title":"A","instruction":"do a","sandbox":{"network":false,"write":["out"]}},
  "b":{"title":"B","instruction":"do b"},
  "p":{"title":"P","instruction":"do p","agent":"mcp"}}},
 "stepQueue":["a","b","p"],"currentStep":0,"stepRuns":{},"stepDelayMinutes":0,"blockers":[],"status":"IN_PROGRESS"}`

// TestSandboxOf: a step's own setting wins; --sandbox sandboxes the rest; a
// pulled step is never sandboxed here.
func TestSandboxOf(t *testing.T) {
	st := parse(t, sandboxSteps)
	for _, c := range []struct {
		id   string
		pol  SandboxPolicy
		want string
	}{
		{"a", SandboxPolicy{}, "sandboxed (no network, write: out)"},
		{"b", SandboxPolicy{}, "not sandboxed"},
		{"b", SandboxPolicy{All: true}, "sandboxed"},
		{"p", SandboxPolicy{All: true}, "not sandboxed"},
	} {
		if got := SandboxOf(st, c.id, c.pol).String(); got != c.want {
			t.Errorf("%s %+v: %q, want %q", c.id, c.pol, got, c.want)
		}
	}
}

// TestMachine_SandboxInLaunch: the launch carries the step's resolved sandbox;
// under --require-sandbox an unsandboxed step is a configuration error that
// launches nothing and spends no try.
func TestMachine_SandboxInLaunch(t *testing.T) {
	r := &rig{t: t, p: &fakeProbe{missing: map[string]bool{}}, now: t0}
	r.m = NewMachine(MachineConfig{Driver: "test", MaxRetries: 3, Probe: r.p})
	r.feed(StateRead{State: parse(t, sandboxSteps)})
	s, ok := started(r.take())
	if !ok || s.Step != "a" || s.Sandbox == nil || !s.Sandbox.NoNetwork {
		t.Fatalf("launch %+v (%v), want step a with its sandbox", s, ok)
	}

	st := parse(t, strings.Replace(sandboxSteps, `"currentStep":0`, `"currentStep":1`, 1))
	r = &rig{t: t, p: &fakeProbe{missing: map[string]bool{}}, now: t0}
	r.m = NewMachine(MachineConfig{Driver: "test", MaxRetries: 3, Probe: r.p, Sandbox: SandboxPolicy{Require: true}})
	r.feed(StateRead{State: st})
	if s, ok := started(r.take()); ok {
		t.Fatalf("unsandboxed step launched under --require-sandbox: %+v", s)
	}
	if err := r.m.CannotLaunch(); err == nil || !strings.Contains(err.Error(), "step b is not sandboxed") {
		t.Errorf("config error %v, want the refusal", err)
	}
	if run := r.m.State().StepRuns["b"]; run != nil && run.Tries > 0 {
		t.Errorf("the refusal spent a try: %+v", run)
	}
}
