package plan

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/planspec"
)

// TestPlan_Sandbox: sandbox: true on the plan is every step's default; a step's
// mapping replaces it whole, and a step's false turns it off; the state written
// and read back says the same.
func TestPlan_Sandbox(t *testing.T) {
	const src = `sandbox: true
steps:
  - {id: a, title: A, instruction: do a}
  - id: b
    title: B
    instruction: do b
    sandbox: {network: false, write: [out, ~/.cache/go-build], read: [/tmp/data], env: [OPENAI_API_KEY]}
  - {id: c, title: C, instruction: do c, sandbox: false}
`
	p, err := ParsePlan(strings.NewReader(src), "plans/sb.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st := p.State("plans/sb.yaml", "sha256:abc")
	back, err := planspec.ParseState(bytes.NewReader(st.Marshal()), "state.json")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"a": "sandboxed",
		"b": "sandboxed (no network, write: out ~/.cache/go-build, read: /tmp/data, env: OPENAI_API_KEY)",
		"c": "not sandboxed",
	}
	for _, s := range []*planspec.State{st, back} {
		for id, w := range want {
			if got := s.SandboxFor(id).String(); got != w {
				t.Errorf("step %s: %q, want %q", id, got, w)
			}
		}
	}
	if !back.Steps["b"].Sandbox.Equal(st.Steps["b"].Sandbox) {
		t.Errorf("step b's sandbox read back as %+v, want %+v", back.Steps["b"].Sandbox, st.Steps["b"].Sandbox)
	}
}

// TestPlan_SandboxErrors: a sandbox of the wrong shape, an unknown key and a
// variable name stepseq owns are located errors.
func TestPlan_SandboxErrors(t *testing.T) {
	const src = `sandbox: yes please
steps:
  - id: a
    title: A
    instruction: do a
    sandbox: {netwrk: false, env: [STEPSEQ_TOKEN, "A=B"]}
`
	_, err := ParsePlan(strings.NewReader(src), "plans/sb.yaml")
	if err == nil {
		t.Fatal("a bad sandbox was accepted")
	}
	for _, w := range []string{
		`sb.yaml:1:10: sandbox: want true, false or {network`,
		`sb.yaml:6:15: unknown key "netwrk": did you mean "network"?`,
		`STEPSEQ_TOKEN: stepseq sets its own STEPSEQ_ variables`,
		`"A=B" is not a variable's name`,
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
}
