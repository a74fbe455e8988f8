package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/web"
)

// TestStatus_RunsAndThePageSayOneWord: for each situation of a run, status's
// headline, status --json's run, runs (its table and --json) and the live
// page's badge say the same word, and status exits 1 exactly when it is
// blocked.
func TestStatus_RunsAndThePageSayOneWord(t *testing.T) {
	t.Setenv("STEP_AGENT_CMD", "true")
	t.Setenv("STEP_MAX_RETRIES", "")
	const plan = `"plan": {"steps": {"a": {"title": "A", "instruction": "x"%s}, "b": {"title": "B", "instruction": "y"}}},
		"stepQueue": ["a", "b"], "stepDelayMinutes": 0, "artifacts": []`
	state := func(gate, rest string) string {
		return "{" + strings.Replace(plan, "%s", gate, 1) + ", " + rest + "}"
	}
	for _, c := range []struct {
		name, state, want string
	}{
		{"a step to run", state("", `"currentStep": 0, "stepRuns": {}, "blockers": [], "status": "IN_PROGRESS"`), "active"},
		{"a step running", state("", `"currentStep": 0, "stepRuns": {"a": {"status": "IN_PROGRESS", "tries": 1}}, "blockers": [], "status": "IN_PROGRESS"`), "active"},
		{"a step waiting on its when", state(`, "when": "exists(\"never\")"`, `"currentStep": 0, "stepRuns": {}, "blockers": [], "status": "IN_PROGRESS"`), "active"},
		{"a step out of tries", state("", `"currentStep": 0, "stepRuns": {"a": {"status": "FAILED", "tries": 3, "error": "e"}},
			"blockers": ["a: max retries (3) exceeded"], "status": "IN_PROGRESS"`), "blocked"},
		{"a worker's blocked report", state("", `"currentStep": 0, "stepRuns": {"a": {"status": "FAILED", "tries": 1, "phase": "blocked", "error": "e"}},
			"blockers": ["a: needs a token"], "status": "IN_PROGRESS"`), "blocked"},
		{"a budget reached", state("", `"currentStep": 1, "stepRuns": {"a": {"status": "DONE", "tries": 1}}, "blockers": [], "status": "IN_PROGRESS",
			"stepseq": {"budget": {"tries": 1}, "spend": {"tries": 1}, "budgetHeld": "budget: 1 of 1 tries spent (tries)"}`), "blocked"},
		{"done", state("", `"currentStep": 2, "stepRuns": {"a": {"status": "DONE", "tries": 1}, "b": {"status": "DONE", "tries": 1}}, "blockers": [], "status": "DONE"`), "done"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(c.state), 0o644); err != nil {
				t.Fatal(err)
			}
			var text, js, runsText, runsJS bytes.Buffer
			err := run(t.Context(), []string{"status", dir}, &text, io.Discard)
			var ee *exitError
			if blocked := errors.As(err, &ee) && ee.code == 1; blocked != (c.want == "blocked") || err != nil && !blocked {
				t.Errorf("status exits with %v, want exit 1 only when blocked", err)
			}
			head, _, _ := strings.Cut(text.String(), "\n")
			_ = run(t.Context(), []string{"status", "--json", dir}, &js, io.Discard)
			var report struct{ Run string }
			if err := json.Unmarshal(js.Bytes(), &report); err != nil {
				t.Fatalf("status --json: %v\n%s", err, js.String())
			}
			if err := run(t.Context(), []string{"runs", dir}, &runsText, io.Discard); err != nil {
				t.Fatalf("runs: %v", err)
			}
			if err := run(t.Context(), []string{"runs", "--json", dir}, &runsJS, io.Discard); err != nil {
				t.Fatalf("runs --json: %v", err)
			}
			var runs []struct{ Name, Status string }
			if err := json.Unmarshal(runsJS.Bytes(), &runs); err != nil || len(runs) != 1 {
				t.Fatalf("runs --json: %v\n%s", err, runsJS.String())
			}
			row := ""
			for line := range strings.Lines(runsText.String()) {
				if f := strings.Fields(line); len(f) > 2 && f[0] == "main" {
					row = f[2]
				}
			}
			rt, err := engine.NewRuntime(filepath.Join(dir, "state.json"), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			badge := web.NewWorkspace(rt, 3, 0).View().Status
			got := map[string]string{
				"status":         strings.TrimSuffix(strings.Fields(head + " - -")[2], ","),
				"status --json":  report.Run,
				"runs":           row,
				"runs --json":    runs[0].Status,
				"the page badge": badge,
			}
			for face, word := range got {
				if word != c.want {
					t.Errorf("%s says %q, want %q (all: %v)", face, word, c.want, got)
				}
			}
		})
	}
}
