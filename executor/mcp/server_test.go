package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/store"
)

// pullPlan is a plan whose steps an MCP worker pulls.
const pullPlan = `agent: mcp
steps:
  - id: fetch
    title: Fetch
    instruction: Find the page and report its url
    result:
      type: object
      required: [url]
      properties:
        url: {type: string, pattern: "^https://"}
  - id: use
    title: Use
    instruction: Use the page
    when: steps.fetch.result.url != ""
`

// workspace is a sidecar running on a fresh workspace.
type workspace struct {
	rt *engine.Runtime
	sc *engine.Sidecar
}

// filesRuntime is a runtime of its own on the state file at state, with the
// engine that acts through the workspace's files, as a server beside another
// process's sidecar has.
func filesRuntime(t testing.TB, state string) (*engine.Runtime, Engine) {
	t.Helper()
	rt, err := engine.NewRuntime(state, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	eng, err := FilesEngine(rt.WS)
	if err != nil {
		t.Fatal(err)
	}
	return rt, eng
}

func newWorkspace(t testing.TB) *workspace {
	t.Helper()
	return workspaceAt(t, t.TempDir())
}

// workspaceAt runs a sidecar on dir, its runtime set up by setup first.
func workspaceAt(t testing.TB, dir string, setup ...func(*engine.Runtime)) *workspace {
	t.Helper()
	rt, err := engine.NewRuntime(filepath.Join(dir, "state.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	for _, f := range setup {
		f(rt)
	}
	sc, err := engine.NewSidecar(rt, engine.SidecarOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sidecar: %v", err)
		}
	})
	deadline := time.Now().Add(effectWait)
	for !sc.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("sidecar not ready")
		}
		time.Sleep(time.Millisecond)
	}
	return &workspace{rt: rt, sc: sc}
}

// connect returns a client session on srv over the in-memory transport.
func connect(t testing.TB, srv *sdk.Server, name string) *sdk.ClientSession {
	t.Helper()
	ct, st := sdk.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := sdk.NewClient(&sdk.Implementation{Name: name, Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool and returns its structured output, or its error text.
func call(t testing.TB, cs *sdk.ClientSession, name string, args any) (map[string]any, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*sdk.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return nil, b.String()
	}
	data, _ := json.Marshal(res.StructuredContent)
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("%s: structured content %s: %v", name, data, err)
	}
	return out, ""
}

// waitTool calls a tool until cond holds.
func waitTool(t testing.TB, cs *sdk.ClientSession, name string, args any, cond func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(effectWait)
	for {
		out, errText := call(t, cs, name, args)
		if errText == "" && cond(out) {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never satisfied the condition; last %v %s", name, out, errText)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func report(token, status string, result any) map[string]any {
	r := map[string]any{"token": token, "status": status, "summary": status + " the step", "evidence": "opened the page",
		"risk": "none", "next": "none"}
	if result != nil {
		r["result"] = result
	}
	return r
}

// drive runs the pull plan through the tools: submit, take, accept, an invalid
// result, the corrected one, done.
func drive(t *testing.T, cs *sdk.ClientSession) {
	t.Helper()
	if out, _ := call(t, cs, "plan_validate", map[string]any{"yaml": "steps:\n  - id: a\n    title: A\n"}); out["valid"] != false ||
		!strings.Contains(strings.Join(toStrings(out["errors"]), "\n"), "2:5: missing instruction") {
		t.Errorf("plan_validate: %v", out)
	}
	out, errText := call(t, cs, "plan_submit", map[string]any{"name": "pull", "yaml": pullPlan})
	if errText != "" || out["status"] != core.PlanActive {
		t.Fatalf("plan_submit: %v %s", out, errText)
	}
	cur := waitTool(t, cs, "step_current", map[string]any{}, func(o map[string]any) bool { return o["step"] != nil })
	step := cur["step"].(map[string]any)
	if step["id"] != "fetch" || step["try"] != 1.0 || step["result"] == nil {
		t.Fatalf("step_current: %v", step)
	}
	token := step["token"].(string)
	if out, _ := call(t, cs, "step_report", report(token, "accepted", nil)); out["accepted"] != true {
		t.Fatalf("accepted: %v", out)
	}
	res, out := callRaw(t, cs, "step_report", report(token, "done", map[string]any{"url": "ftp://x"}))
	if !res.IsError || out["code"] != string(InvalidResult) || out["accepted"] != false || out["step"] != "fetch" ||
		!strings.Contains(strings.Join(toStrings(out["reasons"]), "\n"), "/url: ") {
		t.Fatalf("invalid result: isError %v, %v; want refused with code %s", res.IsError, out, InvalidResult)
	}
	if out, _ := call(t, cs, "step_report", report(token, "done", map[string]any{"url": "https://example.org"})); out["accepted"] != true {
		t.Fatalf("corrected result: %v", out)
	}
	// The token of a try that is over is stale.
	waitTool(t, cs, "status", map[string]any{}, func(o map[string]any) bool {
		return o["steps"].([]any)[0].(map[string]any)["status"] == "DONE"
	})
	if res, out := callRaw(t, cs, "step_report", report(token, "milestone", nil)); !res.IsError || out["code"] != string(Stale) {
		t.Errorf("stale token: want an error with code %s, got %v", Stale, out)
	}
	next := waitTool(t, cs, "step_current", map[string]any{}, func(o map[string]any) bool { return o["step"] != nil })["step"].(map[string]any)
	token = next["token"].(string)
	call(t, cs, "step_report", report(token, "accepted", nil))
	if out, _ := call(t, cs, "step_report", report(token, "done", nil)); out["accepted"] != true {
		t.Fatalf("done: %v", out)
	}
	waitTool(t, cs, "status", map[string]any{}, func(o map[string]any) bool { return o["status"] == "DONE" })
	if out, _ := call(t, cs, "step_current", map[string]any{}); !strings.Contains(out["why"].(string), "DONE") {
		t.Errorf("step_current after DONE: %v", out)
	}
}

func toStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, s := range l {
		out = append(out, s.(string))
	}
	return out
}

func TestServer_PullPlanInProcess(t *testing.T) {
	w := newWorkspace(t)
	srv := NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)})
	cs := connect(t, srv, "worker")
	drive(t, cs)
	if out, _ := call(t, cs, "notifications", map[string]any{}); out == nil {
		t.Error("notifications: no answer")
	}
	if out, _ := call(t, cs, "logs", map[string]any{"step": "fetch"}); out["try"] != 1.0 || out["lines"] == nil || out["Lines"] != nil {
		t.Errorf("logs: %v, want its lines under \"lines\"", out)
	}
	if _, errText := call(t, cs, "retry", map[string]any{"step": "nope"}); !strings.Contains(errText, `no step "nope"`) {
		t.Errorf("retry of an unknown step: %q", errText)
	}
	if out, _ := call(t, cs, "trigger", map[string]any{"step": "use"}); out["queued"] != true {
		t.Errorf("trigger: %v", out)
	}
	if _, errText := call(t, cs, "step_report", report("forged.1.abc", "done", nil)); !strings.Contains(errText, "step_current") {
		t.Errorf("forged token: %q", errText)
	}
}

// status on a workspace with no plan yet answers, it does not fail: no step,
// no blocker, and what to do. So do logs, with their lines under "lines".
func TestServer_StatusWithoutAPlan(t *testing.T) {
	w := newWorkspace(t)
	cs := connect(t, NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)}), "status")
	out, errText := call(t, cs, "status", map[string]any{})
	if errText != "" {
		t.Fatalf("status without a plan is an error: %s", errText)
	}
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if in, _ := json.Marshal(tool.InputSchema); tool.Name == "status" && !strings.Contains(string(in), `"additionalProperties":false`) {
			t.Errorf("status's input schema %s takes any argument", in)
		}
	}
	steps, _ := out["steps"].([]any)
	waiting, _ := out["waitingFor"].(map[string]any)
	if out["steps"] == nil || len(steps) != 0 || !strings.Contains(fmt.Sprint(waiting["reason"]), "plan_submit") {
		t.Errorf("status without a plan = %v", out)
	}
}

func TestServer_PullPlanThroughFiles(t *testing.T) {
	w := newWorkspace(t)                      // holds the lock: this server acts through the files
	rt, eng := filesRuntime(t, w.rt.WS.State) // its own, as another process has
	srv := NewServer(Options{Runtime: rt, Engine: eng})
	t.Cleanup(func() {
		if t.Failed() {
			j, _ := os.ReadFile(rt.WS.JournalPath())
			t.Logf("journal:\n%s", j)
			out, _ := exec.Command("find", rt.WS.Dir+"/.stepseq/reports").CombinedOutput()
			t.Logf("reports:\n%s", out)
		}
	})
	drive(t, connect(t, srv, "worker"))
}

func TestServer_OneWorkerPerTry(t *testing.T) {
	w := newWorkspace(t)
	srv := NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)})
	a, b := connect(t, srv, "a"), connect(t, srv, "b")
	call(t, a, "plan_submit", map[string]any{"name": "pull", "yaml": pullPlan})
	waitTool(t, a, "step_current", map[string]any{}, func(o map[string]any) bool { return o["step"] != nil })
	if out, _ := call(t, b, "step_current", map[string]any{}); out["step"] != nil || !strings.Contains(out["why"].(string), "taken by another worker") {
		t.Errorf("second worker: %v", out)
	}
}

// TestServer_ConditionErrorHidesEnv: a check of the owner's plan that fails on
// what env() gave, transformed, shows its expression and the kind of failure in
// status, and no byte of the value there or in state.json.
func TestServer_ConditionErrorHidesEnv(t *testing.T) {
	const secret = "hunter2-5f3a9c"
	t.Setenv("MYSECRET", secret)
	w := newWorkspace(t)
	srv := NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)})
	cs := connect(t, srv, "worker")
	plan := "maxRetries: 1\nsteps:\n  - id: gate\n    title: Gate\n    instruction: Say done\n    agent: mcp\n" +
		"    check: 'int(join(split(upper(env(\"MYSECRET\")), \"\"), \"_\")) > 0'\n"
	writePlan(t, w, "secret", plan)
	cur := waitTool(t, cs, "step_current", map[string]any{}, func(o map[string]any) bool { return o["step"] != nil })
	token := cur["step"].(map[string]any)["token"].(string)
	call(t, cs, "step_report", report(token, "accepted", nil))
	call(t, cs, "step_report", report(token, "done", nil))
	st := waitTool(t, cs, "status", map[string]any{}, func(o map[string]any) bool {
		return o["steps"].([]any)[0].(map[string]any)["status"] == "FAILED"
	})
	data, _ := json.Marshal(st)
	state, err := os.ReadFile(w.rt.WS.State)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "type conversion failed (the expression reads env(), so what it evaluated is not shown)") {
		t.Errorf("status: want the expression and the kind of failure, got %s", data)
	}
	for _, leak := range []string{"hunter", "HUNTER", "H_U_N", "5F3A", "5f3a"} {
		if strings.Contains(string(data), leak) || strings.Contains(string(state), leak) {
			t.Errorf("%q of the value in status or state.json:\n%s\n%s", leak, data, state)
		}
	}
}

// writePlan drops a plan in the workspace's plans/ as its owner does.
func writePlan(t *testing.T, w *workspace, name, yaml string) string {
	t.Helper()
	dir := filepath.Join(w.rt.WS.Dir, "plans")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestServer_SubmitRefusesNames: a name the sidecar would never read, or that no
// file system can hold, is refused at once with the reason, and nothing is written.
func TestServer_SubmitRefusesNames(t *testing.T) {
	w := newWorkspace(t)
	srv := NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)})
	cs := connect(t, srv, "worker")
	for _, tc := range []struct{ name, want string }{
		{".hidden", `name ".hidden": a name that starts with "." is a hidden file, which the sidecar does not read; start it with a letter or digit, like "hidden"`},
		{"..x.yaml", `start it with a letter or digit, like "x"`},
		{strings.Repeat("n", 300), "longer than 200 bytes"},
		{"a\x00b", "want letters, digits"},
	} {
		if out, errText := call(t, cs, "plan_submit", map[string]any{"name": tc.name, "yaml": pullPlan}); !strings.Contains(errText, tc.want) {
			t.Errorf("name %.40q: got %v %q, want an error containing %q", tc.name, out, errText, tc.want)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(w.rt.WS.Dir, "plans")); len(entries) != 0 {
		t.Errorf("plans written: %v", entries)
	}
}

// TestServer_NotificationsKeepsGluedReports: a partial report with its retried
// copy run on after it still gives the report, and a last line still being
// written is left for the next call.
func TestServer_NotificationsKeepsGluedReports(t *testing.T) {
	w := newWorkspace(t)
	srv := NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)})
	cs := connect(t, srv, "worker")
	r1 := `{"id":"a1","time":"2026-02-10T21:30:00Z","step":"s1","status":"dispatching"}`
	r2 := `{"id":"a2","time":"2026-02-10T21:30:01Z","step":"s1","status":"done"}`
	feed := r1 + "\n" + r2[:30] + r2 + "\n" + `{"id":"a3","time":"2026-02`
	if err := os.WriteFile(filepath.Join(w.rt.WS.Dir, store.MetaDir, "notifications.jsonl"), []byte(feed), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errText := call(t, cs, "notifications", map[string]any{})
	got, _ := json.Marshal(out["notifications"])
	if errText != "" || !strings.Contains(string(got), `"id":"a1"`) || !strings.Contains(string(got), `"id":"a2"`) || strings.Contains(string(got), "a3") {
		t.Errorf("notifications: %s %s, want a1 and a2", got, errText)
	}
}

// TestServer_ReportOverTheCap: a step_report of a megabyte is refused with the
// cap as its reason, as a report file of that size is.
func TestServer_ReportOverTheCap(t *testing.T) {
	w := newWorkspace(t)
	srv := NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)})
	cs := connect(t, srv, "worker")
	call(t, cs, "plan_submit", map[string]any{"name": "pull", "yaml": pullPlan})
	cur := waitTool(t, cs, "step_current", map[string]any{}, func(o map[string]any) bool { return o["step"] != nil })
	r := report(cur["step"].(map[string]any)["token"].(string), "accepted", nil)
	r["summary"] = strings.Repeat("a", 1<<20)
	res, out := callRaw(t, cs, "step_report", r)
	if !res.IsError || out["code"] != string(InvalidParams) || !strings.Contains(strings.Join(toStrings(out["reasons"]), "\n"), "over the 64 KiB cap for a report") {
		t.Errorf("step_report of 1 MiB: %.300v, want refused with code %s", out, InvalidParams)
	}
}

// TestServer_PlanList: plan_list lists plans/ with each plan's verdict, its
// steps' titles and its params' schema; an invalid plan with its errors, a
// link out of the workspace refused without its target named, a hidden file
// left out. An empty plans/ is an empty list, not an error.
func TestServer_PlanList(t *testing.T) {
	w := newWorkspace(t)
	cs := connect(t, NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)}), "lister")
	if out, errText := call(t, cs, "plan_list", map[string]any{}); errText != "" || len(out["plans"].([]any)) != 0 {
		t.Fatalf("plan_list on an empty workspace: %v %s", out, errText)
	}
	plans := filepath.Join(w.rt.WS.Dir, "plans")
	outside := filepath.Join(t.TempDir(), "secret-target.yaml")
	files := map[string]string{
		"review.yaml": "agent: mcp\nparams:\n  target: {type: string, description: what to review}\n  rounds: {type: integer, default: 2}\n" +
			"steps:\n  - id: read\n    title: Read the target\n    instruction: Read {{params.target}}\n  - id: judge\n    title: Judge it\n    instruction: Judge\n",
		"broken.yaml":  "steps:\n  - id: a\n    title: A\n",
		".hidden.yaml": pullPlan,
	}
	if err := os.MkdirAll(plans, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(plans, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(outside, []byte(pullPlan), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(plans, "out.yaml")); err != nil {
		t.Fatal(err)
	}
	out, errText := call(t, cs, "plan_list", map[string]any{})
	if errText != "" {
		t.Fatal(errText)
	}
	byName := map[string]map[string]any{}
	for _, p := range out["plans"].([]any) {
		byName[p.(map[string]any)["name"].(string)] = p.(map[string]any)
	}
	if len(byName) != 3 || byName["hidden"] != nil {
		t.Fatalf("plan_list: %v, want review, broken and out", out)
	}
	review := byName["review"]
	data, _ := json.Marshal(review)
	for _, want := range []string{`"file":"plans/review.yaml"`, `{"id":"read","title":"Read the target"}`, `{"id":"judge","title":"Judge it"}`,
		`"rounds":{"default":2,"type":"integer"}`, `"target":{"description":"what to review","type":"string"}`, `"required":["target"]`,
		`"additionalProperties":false`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("review: %s, want %s in it", data, want)
		}
	}
	if b := byName["broken"]; b["valid"] != false || b["status"] != core.PlanInvalid ||
		!strings.Contains(strings.Join(toStrings(b["errors"]), "\n"), "plans/broken.yaml:2:5: missing instruction") {
		t.Errorf("broken: %v", b)
	}
	o, _ := json.Marshal(byName["out"])
	if byName["out"]["valid"] != false || !strings.Contains(string(o), "errors") || strings.Contains(string(o), "secret-target") {
		t.Errorf("a link out of the workspace: %s, want invalid without its target", o)
	}
}
