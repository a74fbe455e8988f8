package engine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/executor/core"
)

// TestRuntime_AgentAtStart: a sidecar's start is refused, as a configuration
// error worded as check's, only when a step it could go on with needs the
// STEP_AGENT_CMD it lacks, or when STEP_AGENT_CMD is a shell; runs that are
// done, blocked or copies, finished plans, and plans that name their agent
// need none.
func TestRuntime_AgentAtStart(t *testing.T) {
	const (
		plain   = "steps:\n  - {id: a, title: A, instruction: x}\n"
		named   = "agent: claude\nsteps:\n  - {id: a, title: A, instruction: x}\n"
		stepOwn = "steps:\n  - {id: a, title: A, instruction: x, agent: [openclaw, agent]}\n"
		state   = `{"plan": {"steps": {"a": {"title": "A", "instruction": "x"}}}, "stepQueue": ["a"], "currentStep": 0,
			"stepRuns": {}, "stepDelayMinutes": 0, "blockers": [%s], "artifacts": [], "status": "%s"%s}`
	)
	st := func(status, blockers, extra string) string {
		return strings.Replace(strings.Replace(strings.Replace(state, "%s", blockers, 1), "%s", status, 1), "%s", extra, 1)
	}
	for _, c := range []struct {
		name  string
		env   string
		files map[string]string
		want  string // "" for none, else in the error
	}{
		{"empty workspace", "", nil, ""},
		{"a plan without an agent", "", map[string]string{"plans/p.yaml": plain}, "STEP_AGENT_CMD is not set: set it to your agent's command"},
		{"a plan naming its agent", "", map[string]string{"plans/p.yaml": named}, ""},
		{"steps naming their agent", "", map[string]string{"plans/p.yaml": stepOwn}, ""},
		{"an active run", "", map[string]string{"state.json": st("IN_PROGRESS", "", "")}, "(step a of state.json names no agent of its own)"},
		{"a named run", "", map[string]string{"state.review.json": st("IN_PROGRESS", "", "")}, "(step a of state.review.json names"},
		{"a done run", "", map[string]string{"state.json": st("DONE", "", "")}, ""},
		{"a blocked run", "", map[string]string{"state.json": st("IN_PROGRESS", `"a: max retries (3) exceeded"`, "")}, ""},
		{"a copy of another run", "", map[string]string{"state.orig.json": st("IN_PROGRESS", "", `, "stepseq": {"runId": "main:abc"}`)}, ""},
		{"a program not there", "no-such-agent-xyz", map[string]string{"plans/p.yaml": plain}, `agent "no-such-agent-xyz" not found on PATH`},
		{"a program not there, not needed", "no-such-agent-xyz", map[string]string{"plans/p.yaml": named}, ""},
		{"a shell, not needed", "sh -c", map[string]string{"plans/p.yaml": named}, `"sh" is a shell`},
		{"a program that runs", "true", map[string]string{"plans/p.yaml": plain}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, text := range c.files {
				path := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			rt, err := NewRuntime(filepath.Join(dir, "state.json"), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			rt.Getenv = agentEnv(c.env)
			err = rt.AgentAtStart(filepath.Join(dir, "plans"))
			switch {
			case c.want == "" && err != nil:
				t.Errorf("got %v, want none", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, core.ErrConfig)):
				t.Errorf("got %v, want a configuration error with %q", err, c.want)
			}
		})
	}
}
