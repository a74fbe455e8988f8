package mcp

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stepseq/stepseq/planspec"
)

// reconnectPlan is three pulled steps.
const reconnectPlan = `agent: mcp
steps:
  - id: find
    title: Find
    instruction: Find the page
  - id: read
    title: Read
    instruction: Read the page
  - id: sum
    title: Sum
    instruction: Sum it up
`

// reconnectWait bounds each wait of a client that starts stepseq for every call,
// on a loaded machine.
const reconnectWait = 2 * time.Minute

// effectWait bounds the tests' waits for an effect: a ready sidecar, a tool's
// answer, a journal record. A passing test never waits it out, so it is
// generous: on two cores shared with other builds, under -race, what takes a
// second alone can take a minute.
const effectWait = 5 * time.Minute

// callOnce starts `stepseq mcp DIR`, calls one tool and stops it, as a client does
// that restarts its servers between calls.
func callOnce(t *testing.T, dir, name string, args any) (*sdk.CallToolResult, map[string]any) {
	t.Helper()
	cmd := exec.Command(stepseqBinary(t), "mcp", dir)
	cmd.Stderr = &testLog{t: t}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "reconnecting", Version: "1"}, nil).
		Connect(context.Background(), &sdk.CommandTransport{Command: cmd, TerminateDuration: 30 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, out := callRaw(t, cs, name, args)
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	return res, out
}

// TestBinary_PullClientReconnectsBetweenCalls: a worker that restarts `stepseq
// mcp` before every call finishes a plan of three pulled steps with one try each.
// Each restart ends the server's process with the try on offer; the next process
// offers the same try again, with the same prompt and the same token, and takes
// the report made with a token an earlier process issued. A token of a try that
// is over is refused as stale.
func TestBinary_PullClientReconnectsBetweenCalls(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	reconnectEveryCall(t, dir, "", func(name string, args any) (*sdk.CallToolResult, map[string]any) { return callOnce(t, dir, name, args) })
}

// TestBinary_PullClientReconnectsOverHTTP: the same worker over streamable
// HTTP, against a live `watch --listen` that wants a token: a new session for
// every call, closed after it, as a client that exits closes its own; for
// state.json and for a run beside it.
func TestBinary_PullClientReconnectsOverHTTP(t *testing.T) {
	t.Parallel()
	for _, run := range []string{"", "side"} {
		t.Run("run="+run, func(t *testing.T) {
			t.Parallel()
			reconnectOverHTTP(t, run)
		})
	}
}

func reconnectOverHTTP(t *testing.T, run string) {
	dir := t.TempDir()
	const token = "the-reconnect-token-0123456789"
	url := listenWatch(t, dir, token)
	client := &http.Client{Transport: bearerTransport{token: token}}
	reconnectEveryCall(t, dir, run, func(name string, args any) (*sdk.CallToolResult, map[string]any) {
		t.Helper()
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "reconnecting", Version: "1"}, nil).
			Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: client}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		return callRaw(t, cs, name, args)
	})
}

// bearerTransport sends the listener's token.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// listenWatch runs `watch --listen` on a free loopback port for dir, with
// token, and returns its /mcp address once it listens.
func listenWatch(t *testing.T, dir, token string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	watch := exec.Command(stepseqBinary(t), "watch", "--listen", addr, dir)
	watch.Env = append(os.Environ(), "STEPSEQ_TOKEN="+token)
	watch.Stderr = &testLog{t: t}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = watch.Process.Signal(os.Interrupt)
		_ = watch.Wait()
	})
	deadline := time.Now().Add(reconnectWait)
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "http://" + addr + "/mcp"
		}
		if time.Now().After(deadline) {
			t.Fatal("watch --listen never listened")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// reconnectEveryCall drives a plan of three pulled steps with a new client for
// every call (callOnce), and checks that it ends DONE with one try a step, no
// error, no interruption. The plan is submitted into state.json, or started as
// run when one is named.
func reconnectEveryCall(t *testing.T, dir, run string, callOnce func(name string, args any) (*sdk.CallToolResult, map[string]any)) {
	t.Helper()
	onRun := map[string]any{}
	stateFile := "state.json"
	if run == "" {
		if res, out := callOnce("plan_submit", map[string]any{"name": "pull", "yaml": reconnectPlan}); res.IsError || out["status"] != "active" {
			t.Fatalf("plan_submit: %v %v", out, res.Content)
		}
	} else {
		onRun["run"], stateFile = run, "state."+run+".json"
		if res, out := callOnce("run_start", map[string]any{"plan": reconnectPlan, "run": run}); res.IsError {
			t.Fatalf("run_start: %v %v", out, res.Content)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, ".stepseq", "pull.key"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token key mode %04o, want 0600", fi.Mode().Perm())
	}
	// current asks fresh clients until one offers a step other than done.
	current := func(done map[string]bool) map[string]any {
		t.Helper()
		deadline := time.Now().Add(reconnectWait)
		for {
			res, out := callOnce("step_current", onRun)
			if res.IsError {
				t.Fatalf("step_current: %v", res.Content)
			}
			if step, ok := out["step"].(map[string]any); ok && !done[step["id"].(string)] {
				return step
			}
			if time.Now().After(deadline) {
				t.Fatalf("no new step offered within %s; last %v", reconnectWait, out)
			}
		}
	}
	done := map[string]bool{}
	var stale string
	for _, id := range []string{"find", "read", "sum"} {
		step := current(done)
		if step["id"] != id || step["try"] != 1.0 {
			t.Fatalf("offered %v, want step %s try 1", step, id)
		}
		again := current(done)
		if again["id"] != id || again["try"] != 1.0 || again["prompt"] != step["prompt"] || again["token"] != step["token"] {
			t.Fatalf("after a reconnect: %v, want the same offer %v", again, step)
		}
		if strings.Contains(again["prompt"].(string), "Interrupted") {
			t.Errorf("prompt after a reconnect: %q", again["prompt"])
		}
		token := step["token"].(string) // issued two clients ago
		for _, status := range []string{"accepted", "done"} {
			if res, out := callOnce("step_report", report(token, status, nil)); res.IsError || out["accepted"] != true {
				t.Fatalf("step %s %s: %v %v", id, status, out, res.Content)
			}
		}
		done[id] = true
		if stale != "" {
			if res, out := callOnce("step_report", report(stale, "milestone", nil)); !res.IsError || out["code"] != string(Stale) {
				t.Errorf("a token of a finished step: %v %v, want refused with code %s", out, res.Content, Stale)
			}
		}
		stale = token
	}
	deadline := time.Now().Add(reconnectWait)
	for {
		if _, out := callOnce("status", onRun); out["status"] == planspec.StatusDone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the plan is not DONE within %s", reconnectWait)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		t.Fatal(err)
	}
	var st planspec.State
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	for _, id := range st.StepQueue {
		run := st.StepRuns[id]
		if run.Tries != 1 || run.Error != nil || run.Agent != nil && run.Agent.Interruptions != 0 {
			t.Errorf("step %s: tries %d, error %v, agent %+v; want one try, no error, no interruption", id, run.Tries, run.Error, run.Agent)
		}
	}
	journal := filepath.Join(dir, ".stepseq", "journal.jsonl")
	if run != "" {
		journal = filepath.Join(dir, ".stepseq", "runs", run, "journal.jsonl")
	}
	if j, _ := os.ReadFile(journal); strings.Contains(string(j), `"event":"interrupted"`) {
		t.Errorf("journal says interrupted:\n%s", j)
	}
}

// TestServer_GoneSessionDoesNotHoldTheTry: a worker that claimed a try and whose
// session is gone (closed over HTTP, or its connection ended) holds it no longer:
// the next worker's step_current gets the same try, with the same prompt and
// token, and that token's report is taken. No try is spent.
func TestServer_GoneSessionDoesNotHoldTheTry(t *testing.T) {
	for _, tc := range []struct {
		name    string
		connect func(t *testing.T, w *workspace) func(name string) *sdk.ClientSession
	}{
		{"in-process", func(t *testing.T, w *workspace) func(string) *sdk.ClientSession {
			srv := NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)})
			return func(name string) *sdk.ClientSession { return connect(t, srv, name) }
		}},
		{"http", func(t *testing.T, w *workspace) func(string) *sdk.ClientSession {
			srv := httptest.NewServer(Handler(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)}))
			t.Cleanup(srv.Close)
			return func(name string) *sdk.ClientSession {
				cs, err := sdk.NewClient(&sdk.Implementation{Name: name, Version: "1"}, nil).
					Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: srv.URL}, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cs.Close() })
				return cs
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorkspace(t)
			open := tc.connect(t, w)
			a := open("worker")
			call(t, a, "plan_submit", map[string]any{"name": "pull", "yaml": reconnectPlan})
			first := waitTool(t, a, "step_current", map[string]any{}, func(o map[string]any) bool { return o["step"] != nil })["step"].(map[string]any)
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			b := open("worker")
			again := waitTool(t, b, "step_current", map[string]any{}, func(o map[string]any) bool { return o["step"] != nil })["step"].(map[string]any)
			for _, k := range []string{"id", "try", "prompt", "token"} {
				if again[k] != first[k] {
					t.Errorf("%s: %v after the session ended, want %v", k, again[k], first[k])
				}
			}
			for _, status := range []string{"accepted", "done"} {
				if out, errText := call(t, b, "step_report", report(first["token"].(string), status, nil)); out["accepted"] != true {
					t.Fatalf("%s with the first session's token: %v %s", status, out, errText)
				}
			}
			waitTool(t, b, "status", map[string]any{}, func(o map[string]any) bool {
				s := o["steps"].([]any)[0].(map[string]any)
				return s["status"] == planspec.StatusDone && s["tries"] == 1.0
			})
		})
	}
}

// TestBinary_StrangerIsUnauthorized: a client without the token that calls
// run_start on watch --listen's /mcp is refused with 401 and the code
// unauthorized, and nothing starts.
func TestBinary_StrangerIsUnauthorized(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url := listenWatch(t, dir, "the-stranger-token-0123456789")
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"stranger","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_start","arguments":{"plan":"steps:\n  - id: a\n    title: A\n    instruction: a\n","run":"x"}}}`,
	} {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var rpc struct {
			Error struct {
				Message string
				Data    struct{ Code string }
			}
		}
		err = json.NewDecoder(resp.Body).Decode(&rpc)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || err != nil || rpc.Error.Data.Code != string(Unauthorized) || !strings.Contains(rpc.Error.Message, "no token") {
			t.Errorf("a stranger's request: %d %+v (%v), want 401 with code unauthorized", resp.StatusCode, rpc, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "state.x.json")); !os.IsNotExist(err) {
		t.Errorf("a stranger started a run (%v)", err)
	}
}
