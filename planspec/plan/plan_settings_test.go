package plan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
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
