package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/planspec"
)

// everySetting is a plan that sets every top-level key a plan may have.
const everySetting = `
name: every
agent: [a, b]
fallback: [claude, codex]
stepDelay: 90s
maxRetries: 2
timeout: 2h
reports: required
launchTimeout: 1m
milestoneTimeout: 10m
idleTimeout: 5m
heartbeat: 20m
limitWait: 3h
resume: true
notify: [{command: [notify-send, stepseq]}, {webhook: "https://example.com/hook"}]
vars: {k: v, n: 3}
params:
  target: {type: string}
summary:
  target: params.target
steps:
  - {id: one, title: One, instruction: do one}
`

// TestPlan_StateSettingsShape: the settings a plan gives its state are written to
// state.json's stepseq key in this shape, key for key; the plan's params (their
// declarations) are not the run's values and stay out.
func TestPlan_StateSettingsShape(t *testing.T) {
	p, err := ParsePlan(strings.NewReader(everySetting), "plans/every.plan.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st := p.State("plans/every.plan.yaml", "sha256:abc")
	var top map[string]json.RawMessage
	if err := json.Unmarshal(st.Marshal(), &top); err != nil {
		t.Fatal(err)
	}
	const want = `{"name":"every","agent":["a","b"],"fallback":["claude","codex"],"maxRetries":2,"timeout":"2h","vars":{"k":"v","n":3},"summary":{"target":"params.target"},"reports":"required","launchTimeout":"1m","milestoneTimeout":"10m","idleTimeout":"5m","heartbeat":"20m","limitWait":"3h","resume":true,"notify":[{"command":["notify-send","stepseq"]},{"webhook":"https://example.com/hook"}],"source":"plans/every.plan.yaml","hash":"sha256:abc"}`
	var got bytes.Buffer
	if err := json.Compact(&got, top["stepseq"]); err != nil {
		t.Fatal(err)
	}
	if got.String() != want {
		t.Errorf("stepseq key:\n got %s\nwant %s", got.String(), want)
	}
	if got := string(top["stepDelayMinutes"]); got != "1.5" {
		t.Errorf("stepDelayMinutes %s, want 1.5", got)
	}
}

// TestPlan_CheckEnv: for a plan that arrives through a face, every condition
// reading a name of the environment not exposed, or a name built at run time,
// is a located error naming env() and the --expose-env that would allow it; a
// plan reading only exposed names, or none, passes.
func TestPlan_CheckEnv(t *testing.T) {
	const src = `vars: {k: HOME}
steps:
  - id: a
    title: A
    instruction: do a
    when: env("DEPLOY") == "prod"
    check: env("TOKEN") != "" && env("DEPLOY") != ""
  - id: b
    title: B
    instruction: do b
    skip: 'env(vars.k) == ""'
  - id: c
    title: C
    instruction: do c
    check: exists("out")
`
	p, err := ParsePlan(strings.NewReader(src), "plan.yaml")
	if err != nil {
		t.Fatal(err)
	}
	err = p.CheckEnv([]string{"DEPLOY"})
	want := []string{
		`plan.yaml:7:12: check: env("TOKEN"): a plan that arrives through MCP (plan_submit, run_start) reads only the environment the operator exposes (--expose-env TOKEN on watch or mcp); or pass the value as a param`,
		`plan.yaml:11:11: skip: env() with a name built at run time, or $env, is not allowed in a plan that arrives through MCP (plan_submit, run_start): name the variable, env("NAME"), for the operator to expose with --expose-env NAME on watch or mcp`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("CheckEnv([DEPLOY]):\n got %v\nwant %s", err, strings.Join(want, "\n"))
	}
	if !errors.Is(err, ErrInvalidPlan) {
		t.Errorf("want ErrInvalidPlan, got %v", err)
	}
	if err := p.CheckEnv(nil); err == nil || !strings.Contains(err.Error(), `env("DEPLOY"): a plan that arrives through MCP`) {
		t.Errorf("CheckEnv(nil) = %v, want DEPLOY refused too", err)
	}
	p2, _ := ParsePlan(strings.NewReader(strings.Split(src, "  - id: b")[0]), "plan.yaml")
	if err := p2.CheckEnv([]string{"TOKEN", "DEPLOY"}); err != nil {
		t.Errorf("every name exposed: %v", err)
	}
}

// TestState_FaceKept: the face a run's plan arrived through is kept in its
// state's stepseq key, and read back: what env() may read holds after a restart.
func TestState_FaceKept(t *testing.T) {
	p, err := ParsePlan(strings.NewReader(everySetting), "plans/every.plan.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st := p.State("plans/every.plan.yaml", "sha256:abc")
	st.Settings.Face = "mcp"
	data := st.Marshal()
	if !bytes.Contains(data, []byte(`"face": "mcp"`)) {
		t.Fatalf("state.json lacks the face:\n%s", data)
	}
	back, err := planspec.ParseState(bytes.NewReader(data), "state.json")
	if err != nil {
		t.Fatal(err)
	}
	if back.Settings.Face != "mcp" {
		t.Errorf("read back: face %q, want mcp", back.Settings.Face)
	}
}
