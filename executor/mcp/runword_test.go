package mcp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stepseq/stepseq/executor/core"
)

// TestServer_StatusSaysTheRunsWord: a blocked run is blocked in status (its
// run, and the text for clients that read text only) as in run_list, where
// state.json says IN_PROGRESS.
func TestServer_StatusSaysTheRunsWord(t *testing.T) {
	dir := t.TempDir()
	state := `{"plan": {"steps": {"a": {"title": "A", "instruction": "x"}}}, "stepQueue": ["a"], "currentStep": 0,
  "stepRuns": {"a": {"status": "FAILED", "tries": 3, "error": "e"}}, "stepDelayMinutes": 0,
  "blockers": ["a: max retries (3) exceeded"], "artifacts": [], "status": "IN_PROGRESS", "stepseq": {"name": "held"}}`
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	w := workspaceAt(t, dir)
	cs := connect(t, NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)}), "status")
	res := callResult(t, cs, "status")
	out, _ := call(t, cs, "status", map[string]any{})
	if out["run"] != core.RunBlocked || out["status"] != "IN_PROGRESS" {
		t.Errorf("status: run %v, status %v; want blocked, and state.json's IN_PROGRESS", out["run"], out["status"])
	}
	if text := res.Content[0].(*sdk.TextContent).Text; !strings.HasPrefix(text, "plan held: blocked, 0 of 1 steps done") {
		t.Errorf("status text %q, want it to say blocked", text)
	}
	list, errText := call(t, cs, "run_list", map[string]any{})
	if errText != "" {
		t.Fatal(errText)
	}
	if r := list["runs"].([]any)[0].(map[string]any); r["status"] != core.RunBlocked {
		t.Errorf("run_list says %v, want blocked", r["status"])
	}
}

// callResult calls a tool with no arguments and returns its whole result.
func callResult(t *testing.T, cs *sdk.ClientSession, name string) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: name, Arguments: map[string]any{}})
	if err != nil || res.IsError || len(res.Content) == 0 {
		t.Fatalf("%s: %v %+v", name, err, res)
	}
	return res
}
