package plan

import (
	"strings"
	"testing"
)

// TestParsePlan_AgentRunsCode: validate refuses a plan's shell agent at its line,
// with the one message, at plan and step level.
func TestParsePlan_AgentRunsCode(t *testing.T) {
	src := "agent: [env, bash]\nsteps:\n  - id: a\n    title: A\n    instruction: do a\n    agent: [python3, -c, 'print(1)']\n"
	_, err := ParsePlan(strings.NewReader(src), "p.yaml")
	if err == nil {
		t.Fatal("plan with shell agents passed")
	}
	for _, want := range []string{
		`p.yaml:1:8: agent: "bash" is a shell; stepseq never runs the prompt through a shell or as code`,
		`p.yaml:6:12: agent: "python3" -c runs its argument as code; stepseq never runs the prompt through a shell or as code`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors lack %q:\n%v", want, err)
		}
	}
}
