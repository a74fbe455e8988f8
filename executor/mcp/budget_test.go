package mcp

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stepseq/stepseq/planspec"
)

// A run its budget holds: MCP's status shows the hold and the spend, and the
// budget tool raises it, after which the sidecar launches the step.
func TestServer_BudgetHoldsAndRaises(t *testing.T) {
	dir := t.TempDir()
	since := "2026-01-01T00:00:00.000000+00:00"
	state := `{"plan":{"steps":{"s1":{"title":"S1","instruction":"do s1"}}},"stepQueue":["s1"],"currentStep":0,` +
		`"stepRuns":{},"stepDelayMinutes":0,"blockers":[],"status":"IN_PROGRESS",` +
		`"stepseq":{"agent":["true"],"budget":{"tries":1},"spend":{"tries":1,"inputTokens":100,"costUsd":0.25,"sinceIso":"` + since + `"}}}`
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	w := workspaceAt(t, dir)
	cs := connect(t, NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)}), "person")
	out := waitTool(t, cs, "status", map[string]any{}, func(o map[string]any) bool {
		sp, _ := o["spend"].(map[string]any)
		return sp != nil && sp["held"] == "budget: 1 of 1 tries spent (tries)"
	})
	if w := out["waitingFor"].(map[string]any); w["action"] != "budget" {
		t.Fatalf("waiting for %v", w)
	}
	if sp := out["spend"].(map[string]any); sp["costUsd"] != 0.25 || sp["tries"] != 1.0 {
		t.Fatalf("spend %v", sp)
	}
	if got, errText := call(t, cs, "budget", map[string]any{"changes": []string{"tries=+1"}}); errText != "" || got["changes"] != "tries=+1" {
		t.Fatalf("budget: %v %s", got, errText)
	}
	out = waitTool(t, cs, "status", map[string]any{}, func(o map[string]any) bool { return o["status"] == planspec.StatusDone })
	sp := out["spend"].(map[string]any)
	if sp["tries"] != 2.0 || sp["budget"].(map[string]any)["tries"] != 2.0 || sp["held"] != nil {
		t.Fatalf("after the raise: spend %v", sp)
	}
}

// A pulled step's worker says what its try spent in its done report: the
// run's spend counts it.
func TestServer_StepReportUsage(t *testing.T) {
	w := newWorkspace(t)
	cs := connect(t, NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)}), "worker")
	if out, errText := call(t, cs, "plan_submit", map[string]any{"name": "pull", "yaml": pullPlan}); errText != "" {
		t.Fatalf("plan_submit: %v %s", out, errText)
	}
	cur := waitTool(t, cs, "step_current", map[string]any{}, func(o map[string]any) bool { return o["step"] != nil })
	token := cur["step"].(map[string]any)["token"].(string)
	if _, errText := call(t, cs, "step_report", report(token, "accepted", nil)); errText != "" {
		t.Fatal(errText)
	}
	done := report(token, "done", map[string]any{"url": "https://example.com"})
	done["usage"] = map[string]any{"inputTokens": 300, "outputTokens": 40, "costUsd": 0.12, "model": "m"}
	if _, errText := call(t, cs, "step_report", done); errText != "" {
		t.Fatal(errText)
	}
	out := waitTool(t, cs, "status", map[string]any{}, func(o map[string]any) bool {
		sp, _ := o["spend"].(map[string]any)
		return sp != nil && sp["costUsd"] == 0.12
	})
	step := out["steps"].([]any)[0].(map[string]any)
	if u := step["usage"].([]any)[0].(map[string]any); u["model"] != "m" || u["inputTokens"] != 300.0 {
		t.Fatalf("fetch's usage: %v", u)
	}
}
