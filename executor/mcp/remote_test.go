package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stepseq/stepseq/executor"
	"github.com/stepseq/stepseq/executor/core"
)

func httpSession(t *testing.T, url string) *sdk.ClientSession {
	t.Helper()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "remote-test", Version: "1"}, nil).
		Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callRaw calls a tool and returns the whole result.
func callRaw(t *testing.T, cs *sdk.ClientSession, name string, args any) (*sdk.CallToolResult, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	data, _ := json.Marshal(res.StructuredContent)
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	return res, out
}

// TestHandler_PlanFromHTTPNotAllowed: over HTTP, plan_submit refuses a plan
// whose agent is a program of its choosing with the code not_allowed, before
// anything is written: no plan file, no state, nothing run. A pulled plan or
// a preset is taken; --allow-agent lets a listed program in.
func TestHandler_PlanFromHTTPNotAllowed(t *testing.T) {
	w := newWorkspace(t)
	marker := filepath.Join(t.TempDir(), "ran")
	script := filepath.Join(t.TempDir(), "agent.py")
	if err := os.WriteFile(script, []byte("open("+jsonString(marker)+", 'w').write('ran')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)}))
	t.Cleanup(srv.Close)
	cs := httpSession(t, srv.URL)

	evil := "agent: [/usr/bin/python3, " + script + "]\nsteps:\n  - id: a\n    title: A\n    instruction: do a\n"
	res, out := callRaw(t, cs, "plan_submit", map[string]any{"name": "evil", "yaml": evil})
	if !res.IsError || out["code"] != string(NotAllowed) || out["status"] != "refused" {
		t.Fatalf("plan_submit of a program over HTTP: isError %v, %v; want refused, not_allowed", res.IsError, out)
	}
	if errs := toStrings(out["errors"]); len(errs) != 1 || !strings.Contains(errs[0], "stepseq.agent: agent [/usr/bin/python3, "+script+"] is not allowed: a plan that arrives over HTTP may name only agent: mcp, a preset") {
		t.Fatalf("errors = %v", out["errors"])
	}
	if _, out := callRaw(t, cs, "plan_validate", map[string]any{"yaml": evil}); out["valid"] == true || out["code"] != string(NotAllowed) {
		t.Fatalf("plan_validate of a program over HTTP: %v; want not valid, not_allowed", out)
	}
	step := "steps:\n  - id: a\n    title: A\n    instruction: do a\n    agent: [python3, " + script + "]\n"
	if _, out := callRaw(t, cs, "plan_submit", map[string]any{"name": "evil2", "yaml": step}); out["code"] != string(NotAllowed) {
		t.Fatalf("a step's own program: %v", out)
	}
	shell := "agent: [bash]\nsteps:\n  - id: a\n    title: A\n    instruction: do a\n"
	if _, out := callRaw(t, cs, "plan_submit", map[string]any{"name": "shell", "yaml": shell}); out["status"] != core.PlanInvalid {
		t.Fatalf("a shell agent: %v, want invalid", out)
	}
	// run_start over HTTP holds to the same rule, for a plan given as YAML and
	// for one of plans/ it names (the client picks which program runs).
	if res, out := callRaw(t, cs, "run_start", map[string]any{"plan": evil, "run": "evil"}); !res.IsError || out["code"] != string(NotAllowed) {
		t.Fatalf("run_start of a program over HTTP: %v", out)
	}
	// (Its plans folder is one the sidecar does not read, so that the plan is
	// only ever started through run_start here.)
	library := filepath.Join(w.rt.WS.Dir, "library")
	if err := os.MkdirAll(library, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(library, "local.yaml"), []byte(evil), 0o644); err != nil {
		t.Fatal(err)
	}
	lib := httptest.NewServer(Handler(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc), PlansDir: library}))
	t.Cleanup(lib.Close)
	if res, out := callRaw(t, httpSession(t, lib.URL), "run_start", map[string]any{"plan": "local", "run": "local"}); !res.IsError || out["code"] != string(NotAllowed) {
		t.Fatalf("run_start over HTTP of a plan of plans/ that names a program: %v", out)
	}
	for _, p := range []string{filepath.Join(w.rt.WS.Dir, "plans", "evil.yaml"), filepath.Join(w.rt.WS.Dir, "plans", "evil2.yaml"), w.rt.WS.State, marker,
		filepath.Join(w.rt.WS.Dir, "state.evil.json"), filepath.Join(w.rt.WS.Dir, "state.local.json")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s exists after the refusal (%v)", filepath.Base(p), err)
		}
	}

	if _, out := callRaw(t, cs, "plan_submit", map[string]any{"name": "pull", "yaml": pullPlan}); out["status"] != core.PlanActive {
		t.Fatalf("a pulled plan over HTTP: %v", out)
	}
	if _, out := callRaw(t, cs, "plan_validate", map[string]any{"yaml": "agent: claude\nsteps:\n  - id: a\n    title: A\n    instruction: do a\n"}); out["valid"] != true {
		t.Fatalf("a preset: %v", out)
	}
}

// TestHandler_AllowAgent: with --allow-agent, a listed program is taken over
// HTTP, and a preset the list does not hold is not.
func TestHandler_AllowAgent(t *testing.T) {
	w := newWorkspace(t)
	allow, err := executor.ParseAllowList([]string{"true"}, w.rt.WS.Dir)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc), Allow: allow}))
	t.Cleanup(srv.Close)
	cs := httpSession(t, srv.URL)
	claude := "agent: claude\nsteps:\n  - id: a\n    title: A\n    instruction: do a\n"
	if res, out := callRaw(t, cs, "plan_submit", map[string]any{"name": "c", "yaml": claude}); !res.IsError || out["code"] != string(NotAllowed) {
		t.Fatalf("an unlisted preset: %v", out)
	}
	listed := "agent: [\"true\"]\nsteps:\n  - id: a\n    title: A\n    instruction: do a\n"
	// Taken: active, or already finished when its step (true) was quicker
	// than the answer, as it was once in 5 race runs beside two CPU burners.
	if res, out := callRaw(t, cs, "plan_submit", map[string]any{"name": "t", "yaml": listed}); res.IsError || out["status"] != core.PlanActive && out["status"] != core.PlanFinished {
		t.Fatalf("a listed program: %v", out)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// initialize opens a session with a bare initialize request, as a client
// that never closes it would, and returns the answer's status and session id.
func initialize(t *testing.T, url string) (int, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
}

func sessions(srv *sdk.Server) int {
	n := 0
	for range srv.Sessions() {
		n++
	}
	return n
}

// TestHandler_SessionsBounded: a client that opens sessions and never closes
// them gets 429 past its bound, and every idle session is closed after
// SessionIdle, after which the client may open more.
func TestHandler_SessionsBounded(t *testing.T) {
	w := newWorkspace(t)
	opt := Options{Runtime: w.rt, Engine: SidecarEngine(w.sc), SessionIdle: 500 * time.Millisecond, MaxSessions: 100, MaxSessionsPerClient: 5}
	h := Handler(opt)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	gate := h.(*sessionGate)
	for i := range 5 {
		if code, id := initialize(t, srv.URL); code != http.StatusOK || id == "" {
			t.Fatalf("session %d: %d %q", i, code, id)
		}
	}
	if code, _ := initialize(t, srv.URL); code != http.StatusTooManyRequests {
		t.Fatalf("a sixth session of one client got %d, want 429", code)
	}
	deadline := time.Now().Add(effectWait)
	for sessions(gate.srv) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d idle sessions still open after %s", sessions(gate.srv), effectWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, _ := initialize(t, srv.URL); code != http.StatusOK {
		t.Fatalf("once idle sessions expired, a new one got %d", code)
	}
}

// TestHandler_SessionsBoundedForAll: past MaxSessions every client gets 503.
func TestHandler_SessionsBoundedForAll(t *testing.T) {
	w := newWorkspace(t)
	h := Handler(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc), MaxSessions: 3, MaxSessionsPerClient: 10})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	for range 3 {
		if code, _ := initialize(t, srv.URL); code != http.StatusOK {
			t.Fatalf("initialize: %d", code)
		}
	}
	if code, _ := initialize(t, srv.URL); code != http.StatusServiceUnavailable {
		t.Fatalf("past MaxSessions: %d, want 503", code)
	}
}

// TestHandler_FacePlanReadsNoEnv: a plan that arrives over MCP reads no
// environment: plan_submit, plan_validate and run_start refuse one whose
// condition calls env() for a name --expose-env does not list (invalid_plan,
// located, naming env() and the flag), before anything is written; run_start
// of a plan of plans/ that reads one is refused too, since the run is the
// face's. The workspace's own plan keeps env(). With the name exposed, the
// submitted plan runs, reads it, and its state says it came through MCP.
func TestHandler_FacePlanReadsNoEnv(t *testing.T) {
	t.Setenv("STEPSEQ_TEST_SECRET", "s3cret")
	gated := "agent: mcp\nsteps:\n  - id: a\n    title: A\n    instruction: do a\n    when: env(\"STEPSEQ_TEST_SECRET\") == \"s3cret\"\n"
	const reason = `6:11: when: env("STEPSEQ_TEST_SECRET"): a plan that arrives through MCP (plan_submit, run_start) reads only the environment the operator exposes (--expose-env STEPSEQ_TEST_SECRET on watch or mcp); or pass the value as a param`

	w := newWorkspace(t)
	srv := httptest.NewServer(Handler(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)}))
	t.Cleanup(srv.Close)
	cs := httpSession(t, srv.URL)
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"plan_submit", map[string]any{"name": "leak", "yaml": gated}},
		{"run_start", map[string]any{"plan": gated, "run": "leak"}},
	} {
		res, out := callRaw(t, cs, tc.tool, tc.args)
		reasons := toStrings(out["reasons"])
		if !res.IsError || out["code"] != string(InvalidPlan) || len(reasons) != 1 || reasons[0] != reason {
			t.Errorf("%s: isError %v, %v; want invalid_plan: %s", tc.tool, res.IsError, out, reason)
		}
	}
	if _, out := callRaw(t, cs, "plan_validate", map[string]any{"yaml": gated}); out["valid"] == true || out["code"] != string(InvalidPlan) ||
		strings.Join(toStrings(out["errors"]), "\n") != reason {
		t.Errorf("plan_validate: %v", out)
	}
	for _, rel := range []string{"plans/leak.yaml", "state.json", "state.leak.json"} {
		if w.exists(t, rel) {
			t.Errorf("%s written for a refused plan", rel)
		}
	}

	// The workspace's own plan reads the environment: its gate opens.
	writePlan(t, w, "own", gated)
	waitTool(t, cs, "step_current", map[string]any{}, func(o map[string]any) bool { return o["step"] != nil })
	res, out := callRaw(t, cs, "run_start", map[string]any{"plan": "own", "run": "mine"})
	if !res.IsError || out["code"] != string(InvalidPlan) || !strings.Contains(strings.Join(toStrings(out["reasons"]), ""), "--expose-env STEPSEQ_TEST_SECRET") {
		t.Errorf("run_start of the workspace's plan that reads env(): %v", out)
	}

	// Exposed, the name is read.
	x := workspaceAt(t, t.TempDir(), func(rt *executor.Runtime) { rt.ExposeEnv = []string{"STEPSEQ_TEST_SECRET"} })
	xsrv := httptest.NewServer(Handler(Options{Runtime: x.rt, Engine: SidecarEngine(x.sc)}))
	t.Cleanup(xsrv.Close)
	xcs := httpSession(t, xsrv.URL)
	if res, out := callRaw(t, xcs, "plan_submit", map[string]any{"name": "gated", "yaml": gated}); res.IsError || out["status"] != core.PlanActive {
		t.Fatalf("plan_submit with the name exposed: %v", out)
	}
	waitTool(t, xcs, "step_current", map[string]any{}, func(o map[string]any) bool { return o["step"] != nil })
	state, err := os.ReadFile(x.rt.WS.State)
	if err != nil || !strings.Contains(string(state), `"face": "mcp"`) {
		t.Errorf("state.json of a submitted plan lacks its face (%v):\n%s", err, state)
	}
	if _, out := callRaw(t, xcs, "plan_validate", map[string]any{"yaml": strings.ReplaceAll(gated, "STEPSEQ_TEST_SECRET", "HOME")}); out["valid"] == true {
		t.Errorf("a name not exposed beside one that is: %v", out)
	}
}
