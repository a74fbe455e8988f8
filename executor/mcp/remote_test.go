package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
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
	allow, err := engine.ParseAllowList([]string{"true"}, w.rt.WS.Dir)
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
	x := workspaceAt(t, t.TempDir(), func(rt *engine.Runtime) { rt.ExposeEnv = []string{"STEPSEQ_TEST_SECRET"} })
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

// TestHandler_SubmitNeverTakesANameInUse: over HTTP MCP, plan_submit with the
// name of the workspace's own plan, while its run runs, is refused with busy
// naming the owner; the file's bytes, the run's agent and its queue are as they
// were. So is a name another file of plans/ has, the name of the running plan
// whose file is gone, and a plan a face submitted that waits its turn;
// run_start with a run's name takes busy too.
func TestHandler_SubmitNeverTakesANameInUse(t *testing.T) {
	w := newWorkspace(t)
	sleeper := filepath.Join(t.TempDir(), "sleeper.py")
	if err := os.WriteFile(sleeper, []byte("import time\ntime.sleep(120)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	owned := "agent: [/usr/bin/python3, " + sleeper + "]\nsteps:\n  - id: one\n    title: One\n    instruction: work\n" +
		"  - id: two\n    title: Two\n    instruction: more work\n"
	path := writePlan(t, w, "owned", owned)
	srv := httptest.NewServer(Handler(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)}))
	t.Cleanup(srv.Close)
	cs := httpSession(t, srv.URL)
	running := func(o map[string]any) bool {
		steps, _ := o["steps"].([]any)
		return len(steps) == 2 && steps[0].(map[string]any)["status"] == planspec.StatusInProgress
	}
	waitTool(t, cs, "status", map[string]any{}, running)
	before, err := os.ReadFile(w.rt.WS.State)
	if err != nil {
		t.Fatal(err)
	}

	submit := func(name, yaml, want string) {
		t.Helper()
		res, out := callRaw(t, cs, "plan_submit", map[string]any{"name": name, "yaml": yaml})
		reasons := strings.Join(toStrings(out["reasons"]), "; ")
		if !res.IsError || out["code"] != string(Busy) || !strings.Contains(reasons, want) {
			t.Errorf("plan_submit %s: isError %v, %v; want busy: …%s…", name, res.IsError, out, want)
		}
	}
	submit("owned", pullPlan, `name "owned" is in use: plans/owned.yaml is the workspace's own plan (written there, not submitted through MCP), and a submit never replaces it`)
	if data, err := os.ReadFile(path); err != nil || string(data) != owned {
		t.Errorf("plans/owned.yaml after the refusal: %q, %v", data, err)
	}
	writePlan(t, w, "later.plan", pullPlan)
	submit("later", pullPlan, `plans/later.plan.yaml is the workspace's own plan`)
	if w.exists(t, "plans/later.yaml") {
		t.Error("plans/later.yaml written beside plans/later.plan.yaml")
	}
	// The run is the plan's, its file gone or not.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	submit("owned", pullPlan, `name "owned" is in use: plans/owned.yaml runs in state.json (step 1 of 2; the workspace's own plan), and a submit never rewrites a running run`)
	if w.exists(t, "plans/owned.yaml") {
		t.Error("plans/owned.yaml written for the running run")
	}

	// A face's own plan that waits is in use too.
	if res, out := callRaw(t, cs, "plan_submit", map[string]any{"name": "mine", "yaml": pullPlan}); res.IsError || out["status"] != core.PlanWaiting {
		t.Fatalf("plan_submit mine: %v", out)
	}
	submit("mine", strings.Replace(pullPlan, "Fetch", "Take", 1), `name "mine" is in use: plans/mine.yaml, submitted through MCP by remote-test`)

	if _, errText := call(t, cs, "run_start", map[string]any{"plan": pullPlan, "run": "side"}); errText != "" {
		t.Fatal(errText)
	}
	res, out := callRaw(t, cs, "run_start", map[string]any{"plan": strings.Replace(pullPlan, "Fetch", "Take", 1), "run": "side"})
	if reasons := strings.Join(toStrings(out["reasons"]), "; "); !res.IsError || out["code"] != string(Busy) ||
		!strings.Contains(reasons, "a run of that name exists: side (plan plan, started through MCP; its state is state.side.json") {
		t.Errorf("run_start with a run's name: %v", out)
	}

	// The running run is as it was: its agent, its queue, its try.
	st := waitTool(t, cs, "status", map[string]any{}, running)
	after, err := (&store.StateFile{Path: w.rt.WS.State}).Read()
	if err != nil {
		t.Fatal(err)
	}
	if got := after.Settings.Agent.Argv; len(got) != 2 || got[0] != "/usr/bin/python3" || strings.Join(after.StepQueue, ",") != "one,two" ||
		after.StepRuns["one"].Tries != 1 || after.Settings.Face != "" {
		t.Errorf("the running run changed: agent %v, queue %v, tries %d, face %q\nbefore %s\nstatus %v", got, after.StepQueue,
			after.StepRuns["one"].Tries, after.Settings.Face, before, st)
	}
}

// TestServer_SubmitReplacesItsOwnFinishedPlan: a plan file a face wrote whose
// plan finished may be submitted again under its name: a new run of the new
// content.
func TestServer_SubmitReplacesItsOwnFinishedPlan(t *testing.T) {
	w := newWorkspace(t)
	cs := connect(t, NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)}), "worker")
	drive(t, cs)
	again := strings.Replace(pullPlan, "Fetch", "Fetch again", 1)
	if out, errText := call(t, cs, "plan_submit", map[string]any{"name": "pull", "yaml": again}); errText != "" || out["status"] != core.PlanActive {
		t.Fatalf("plan_submit of a finished plan's name: %v %s", out, errText)
	}
	if data, err := os.ReadFile(filepath.Join(w.rt.WS.Dir, "plans", "pull.yaml")); err != nil || string(data) != again {
		t.Errorf("plans/pull.yaml = %q, %v", data, err)
	}
}

// TestCreateNew_NeverReplaces: a plan file is written whole where none is, and
// never over one another writer put there; no temporary file is left.
func TestCreateNew_NeverReplaces(t *testing.T) {
	dir := t.TempDir()
	if err := createNew(dir, "a.yaml", []byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.yaml"), []byte("owner's"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := createNew(dir, "b.yaml", []byte("face's")); !errors.Is(err, fs.ErrExist) {
		t.Errorf("over a file: %v, want fs.ErrExist", err)
	}
	for name, want := range map[string]string{"a.yaml": "new", "b.yaml": "owner's"} {
		if data, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(data) != want {
			t.Errorf("%s = %q, %v; want %q", name, data, err, want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("left behind: %v", entries)
	}
}
