package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stepseq/stepseq/executor/listener"
)

// gatedPullPlan is a pulled plan that waits for a yes before its first step,
// and again before its second.
const gatedPullPlan = `agent: mcp
approval: required
steps:
  - id: draft
    title: Draft
    instruction: Write the draft
  - id: publish
    title: Publish
    instruction: Publish it
    approve: true
`

// TestServer_ApproveReject: an operator's session answers the gates; a
// worker's session (one that called step_current) may not, its own gate or
// another's. A second approve is an answer; an unknown step is not_found; a
// reject needs its note (invalid_params) and blocks the step with it; an
// approve after the reject is not_allowed, saying what the run waits for.
func TestServer_ApproveReject(t *testing.T) {
	w := newWorkspace(t)
	srv := NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)})
	op, worker := connect(t, srv, "operator"), connect(t, srv, "worker")
	if _, errText := call(t, op, "plan_submit", map[string]any{"name": "gated", "yaml": gatedPullPlan}); errText != "" {
		t.Fatal(errText)
	}
	waitTool(t, op, "status", map[string]any{}, func(out map[string]any) bool {
		wf, _ := out["waitingFor"].(map[string]any)
		return wf["action"] == "awaiting_approval"
	})
	cur, _ := call(t, worker, "step_current", map[string]any{})
	if why, _ := cur["why"].(string); !strings.Contains(why, "awaiting approval") {
		t.Fatalf("step_current before the yes: %v", cur)
	}
	if code, why := callRawCode(t, worker, "approve", map[string]any{}); code != string(NotAllowed) || !strings.Contains(why, "a worker's session may not answer a gate") {
		t.Fatalf("a worker's approve: %s %s", code, why)
	}
	out, errText := call(t, op, "approve", map[string]any{"by": "alice", "note": "the plan reads well"})
	if errText != "" || out["plan"] != true || out["answer"] != "approved" || out["step"] != "draft" {
		t.Fatalf("approve: %v %s", out, errText)
	}
	waitTool(t, op, "status", map[string]any{}, func(out map[string]any) bool {
		wf, _ := out["waitingFor"].(map[string]any)
		return wf["action"] != "awaiting_approval"
	})
	if out, errText := call(t, op, "approve", map[string]any{"step": "draft"}); out["again"] != true {
		t.Errorf("a second approve: %v %s", out, errText)
	}
	if code, why := callRawCode(t, op, "approve", map[string]any{"step": "nope"}); code != string(NotFound) || !strings.Contains(why, `no step "nope"`) {
		t.Errorf("approve of an unknown step: %s %s", code, why)
	}
	// The worker does the first step; the second waits for its own yes.
	cur = waitTool(t, worker, "step_current", map[string]any{}, func(out map[string]any) bool { return out["step"] != nil })
	token := cur["step"].(map[string]any)["token"].(string)
	for _, status := range []string{"accepted", "done"} {
		if _, errText := call(t, worker, "step_report", report(token, status, nil)); errText != "" {
			t.Fatal(errText)
		}
	}
	waitTool(t, op, "status", map[string]any{}, func(out map[string]any) bool {
		wf, _ := out["waitingFor"].(map[string]any)
		return wf["action"] == "awaiting_approval" && wf["step"] == "publish"
	})
	if code, why := callRawCode(t, op, "reject", map[string]any{}); code != string(InvalidParams) || !strings.Contains(why, "a reject needs a note") {
		t.Errorf("a reject without a note: %s %s", code, why)
	}
	if out, errText := call(t, op, "reject", map[string]any{"note": "not before Monday"}); errText != "" || out["answer"] != "rejected" {
		t.Fatalf("reject: %v %s", out, errText)
	}
	waitTool(t, op, "status", map[string]any{}, func(out map[string]any) bool {
		b := toStrings(out["blockers"])
		return len(b) == 1 && strings.HasPrefix(b[0], "publish: rejected by mcp client operator (mcp): not before Monday")
	})
	if code, why := callRawCode(t, op, "approve", map[string]any{"step": "publish"}); code != string(NotAllowed) || !strings.Contains(why, "stepseq retry publish") {
		t.Errorf("an approve after the reject: %s %s", code, why)
	}
}

// TestServer_ApproveFromAnAgentsServer: `stepseq mcp` run by an agent stepseq
// launched (its environment holds the try's marks) answers no gate.
func TestServer_ApproveFromAnAgentsServer(t *testing.T) {
	w := newWorkspace(t)
	rt, eng := filesRuntime(t, w.rt.WS.State)
	rt.Getenv = func(k string) string { return map[string]string{"STEPSEQ_STEP": "draft", "STEPSEQ_TRY": "1"}[k] }
	cs := connect(t, NewServer(Options{Runtime: rt, Engine: eng}), "agent")
	if code, why := callRawCode(t, cs, "approve", map[string]any{}); code != string(NotAllowed) || !strings.Contains(why, "environment of the agent of step draft") {
		t.Fatalf("approve from an agent's server: %s %s", code, why)
	}
}

// TestHandler_ApproveNeedsTheToken: over HTTP, a session answers a gate only
// behind the listener's token; without one, any program that reaches the
// port could, and the call is refused.
func TestHandler_ApproveNeedsTheToken(t *testing.T) {
	w := newWorkspace(t)
	local := connect(t, NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)}), "operator")
	if _, errText := call(t, local, "plan_submit", map[string]any{"name": "gated", "yaml": gatedPullPlan}); errText != "" {
		t.Fatal(errText)
	}
	waitTool(t, local, "status", map[string]any{}, func(out map[string]any) bool {
		wf, _ := out["waitingFor"].(map[string]any)
		return wf["action"] == "awaiting_approval"
	})
	open := httptest.NewServer(Handler(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)}))
	t.Cleanup(open.Close)
	if code, why := callRawCode(t, httpSession(t, open.URL), "approve", map[string]any{}); code != string(NotAllowed) || !strings.Contains(why, "needs the listener's token") {
		t.Fatalf("approve over HTTP without a token: %s %s", code, why)
	}
	cs := tokenSession(t, w)
	if out, errText := call(t, cs, "approve", map[string]any{"by": "alice"}); errText != "" || out["answer"] != "approved" {
		t.Fatalf("approve with the token: %v %s", out, errText)
	}
}

// tokenSession is an operator's session over HTTP: the workspace's handler
// behind the listener's token guard, the client presenting the token.
func tokenSession(t *testing.T, w *workspace) *sdk.ClientSession {
	t.Helper()
	const token = "0123456789abcdef0123456789abcdef"
	guarded := httptest.NewServer(listener.NewGuard(token, nil).MCP(Handler(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc),
		Authenticated: listener.Authenticated, TokenGuarded: true})))
	t.Cleanup(guarded.Close)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "operator-http", Version: "1"}, nil).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: guarded.URL, HTTPClient: &http.Client{Transport: bearerTransport{token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}
