package mcp

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
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

// cappedPullPlan is a pulled plan whose budget lets one try run.
const cappedPullPlan = `agent: mcp
budget: {tries: 1}
steps:
  - id: draft
    title: Draft
    instruction: Write the draft
  - id: publish
    title: Publish
    instruction: Publish it
`

// TestServer_BudgetIsAnOperators: a worker's session that pulled a try, held
// by the run's budget after it, may not raise it: refused, naming who may.
// An operator's session may: a change that does not read or names no step
// is refused with its code, and a raise lets the worker pull the next try.
func TestServer_BudgetIsAnOperators(t *testing.T) {
	w := newWorkspace(t)
	srv := NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)})
	op, worker := connect(t, srv, "operator"), connect(t, srv, "worker")
	if _, errText := call(t, op, "plan_submit", map[string]any{"name": "capped", "yaml": cappedPullPlan}); errText != "" {
		t.Fatal(errText)
	}
	cur := waitTool(t, worker, "step_current", map[string]any{}, func(o map[string]any) bool { return o["step"] != nil })
	token := cur["step"].(map[string]any)["token"].(string)
	for _, status := range []string{"accepted", "done"} {
		if _, errText := call(t, worker, "step_report", report(token, status, nil)); errText != "" {
			t.Fatal(errText)
		}
	}
	waitTool(t, op, "status", map[string]any{}, func(o map[string]any) bool {
		sp, _ := o["spend"].(map[string]any)
		return sp != nil && sp["held"] == "budget: 1 of 1 tries spent (tries)"
	})
	code, why := callRawCode(t, worker, "budget", map[string]any{"changes": []string{"tries=+5"}})
	if code != string(NotAllowed) || !strings.Contains(why, "a worker's session may not change a run's budget: an agent may not raise what it may spend") ||
		!strings.Contains(why, "a person changes it, from an operator's session") || !strings.Contains(why, "stepseq budget") {
		t.Fatalf("a worker's budget: %s %s", code, why)
	}
	for _, tc := range []struct {
		args map[string]any
		code Code
		want string
	}{
		{map[string]any{"changes": []string{"tries+1"}}, InvalidParams, `arguments.changes: budget change "tries+1": want KEY=+AMOUNT`},
		{map[string]any{"changes": []string{"dollars=+2"}}, InvalidParams, `unknown budget key "dollars"`},
		{map[string]any{"changes": []string{"tries=+1"}, "step": "nope"}, NotFound, `no step "nope" in the plan (steps: draft, publish)`},
	} {
		if code, why := callRawCode(t, op, "budget", tc.args); code != string(tc.code) || !strings.Contains(why, tc.want) {
			t.Errorf("budget %v: %s %s, want %s saying %q", tc.args, code, why, tc.code, tc.want)
		}
	}
	if got, errText := call(t, op, "budget", map[string]any{"changes": []string{"tries=+1"}}); errText != "" || got["changes"] != "tries=+1" {
		t.Fatalf("the operator's budget: %v %s", got, errText)
	}
	cur = waitTool(t, worker, "step_current", map[string]any{}, func(o map[string]any) bool { return o["step"] != nil })
	if id := cur["step"].(map[string]any)["id"]; id != "publish" {
		t.Fatalf("after the raise the worker got %v, want publish", id)
	}
	out, _ := call(t, op, "status", map[string]any{})
	if sp := out["spend"].(map[string]any); sp["budget"].(map[string]any)["tries"] != 2.0 {
		t.Errorf("budget after the raise: %v, want tries 2 and no more", sp["budget"])
	}
}

// TestServer_BudgetFromAnAgentsServer: `stepseq mcp` run by an agent stepseq
// launched (its environment holds the try's marks) changes no budget.
func TestServer_BudgetFromAnAgentsServer(t *testing.T) {
	w := newWorkspace(t)
	rt, eng := filesRuntime(t, w.rt.WS.State)
	rt.Getenv = func(k string) string { return map[string]string{"STEPSEQ_STEP": "draft", "STEPSEQ_TRY": "1"}[k] }
	cs := connect(t, NewServer(Options{Runtime: rt, Engine: eng}), "agent")
	code, why := callRawCode(t, cs, "budget", map[string]any{"changes": []string{"usd=+2"}})
	if code != string(NotAllowed) || !strings.Contains(why, "environment of the agent of step draft, try 1") {
		t.Fatalf("budget from an agent's server: %s %s", code, why)
	}
}

// TestHandler_BudgetNeedsTheToken: over HTTP, a session changes a run's
// budget only behind the listener's token.
func TestHandler_BudgetNeedsTheToken(t *testing.T) {
	w := newWorkspace(t)
	local := connect(t, NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)}), "operator")
	if _, errText := call(t, local, "plan_submit", map[string]any{"name": "capped", "yaml": cappedPullPlan}); errText != "" {
		t.Fatal(errText)
	}
	open := httptest.NewServer(Handler(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)}))
	t.Cleanup(open.Close)
	code, why := callRawCode(t, httpSession(t, open.URL), "budget", map[string]any{"changes": []string{"usd=+2"}})
	if code != string(NotAllowed) || !strings.Contains(why, "changing a run's budget over HTTP needs the listener's token") ||
		!strings.Contains(why, "change it with stepseq budget instead") {
		t.Fatalf("budget over HTTP without a token: %s %s", code, why)
	}
	cs := tokenSession(t, w)
	if got, errText := call(t, cs, "budget", map[string]any{"changes": []string{"usd=+2"}}); errText != "" || got["changes"] != "usd=+2" {
		t.Fatalf("budget with the token: %v %s", got, errText)
	}
}
