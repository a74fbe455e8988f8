package mcp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/planspec"
)

// A client that merely starts stepseq mcp (Claude Code does at every session
// start and at `claude mcp list`) moves nothing: the plan in plans/ is shown,
// status says it is held and by whom, no state.json is written and no agent
// runs, until the client acts with run_resume.
func TestBinary_MerelyStartedDrivesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plan := "name: example\nagent: [touch, ran]\nsteps:\n  - id: one\n    title: One\n    instruction: do one\n"
	if err := os.MkdirAll(filepath.Join(dir, "plans"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plans", "example.yaml"), []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	cs := stdioSession(t, dir)
	out, errText := call(t, cs, "status", map[string]any{})
	w, _ := out["waitingFor"].(map[string]any)
	if errText != "" || w["action"] != "held" || !strings.Contains(w["reason"].(string), "run_resume") {
		t.Fatalf("status of a merely started server: %v %s", out, errText)
	}
	if out, _ := call(t, cs, "plan_list", map[string]any{}); !strings.Contains(strings.ToLower(toJSON(out)), "example") {
		t.Errorf("plan_list does not show the folder's plan: %v", out)
	}
	for _, f := range []string{"state.json", "ran"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Fatalf("%s exists before any client acted", f)
		}
	}
	if out, errText := call(t, cs, "run_resume", map[string]any{}); out["driven"] != true {
		t.Fatalf("run_resume: %v %s", out, errText)
	}
	waitTool(t, cs, "status", map[string]any{}, func(o map[string]any) bool { return o["status"] == planspec.StatusDone })
	if _, err := os.Stat(filepath.Join(dir, "ran")); err != nil {
		t.Errorf("the agent never ran once driven: %v", err)
	}
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// step_current on a named run shows that run's progress and resultFile, not the
// workspace's own run's (which has none here).
func TestServer_StepCurrentOfNamedRunShowsItsProgress(t *testing.T) {
	w := newWorkspace(t)
	cs := connect(t, NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)}), "worker")
	plan := "agent: mcp\nsteps:\n  - id: rounds\n    title: Rounds\n    repeat: {max: 2}\n    steps:\n" +
		"      - id: fetch\n        title: Fetch\n        instruction: fetch it\n        resultFrom: file:out.json\n"
	if _, errText := call(t, cs, "run_start", map[string]any{"plan": plan, "run": "side"}); errText != "" {
		t.Fatal(errText)
	}
	cur := waitTool(t, cs, "step_current", map[string]any{"run": "side"}, func(o map[string]any) bool { return o["step"] != nil })["step"].(map[string]any)
	if cur["progress"] != "round 1/2, step 1/1" || cur["resultFile"] != "out.json" {
		t.Errorf("step_current of run side: progress %v, resultFile %v; want round 1/2, step 1/1 and out.json", cur["progress"], cur["resultFile"])
	}
}
