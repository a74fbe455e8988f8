package mcp

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// driveRun pulls a run's steps through the tools: step_current and step_report
// with run, a token that names its run, an invalid result refused, and the run
// DONE with one try a step.
func driveRun(t *testing.T, cs *sdk.ClientSession) {
	t.Helper()
	if _, errText := call(t, cs, "run_start", map[string]any{"plan": pullPlan, "run": "side"}); errText != "" {
		t.Fatal(errText)
	}
	cur := waitTool(t, cs, "step_current", map[string]any{"run": "side"}, func(o map[string]any) bool { return o["step"] != nil })["step"].(map[string]any)
	token := cur["token"].(string)
	if cur["id"] != "fetch" || !strings.HasPrefix(token, "side:") {
		t.Fatalf("step_current of run side: %v", cur)
	}
	if out, _ := call(t, cs, "step_current", map[string]any{}); out["step"] != nil {
		t.Errorf("the workspace's own run offers %v: the run's step is not its", out)
	}
	if out, errText := call(t, cs, "step_report", report(token, "accepted", nil)); out["accepted"] != true {
		t.Fatalf("accepted: %v %s", out, errText)
	}
	if res, out := callRaw(t, cs, "step_report", report(token, "done", map[string]any{"url": "ftp://x"})); !res.IsError || out["code"] != string(InvalidResult) {
		t.Fatalf("invalid result: %v", out)
	}
	if out, errText := call(t, cs, "step_report", report(token, "done", map[string]any{"url": "https://example.org"})); out["accepted"] != true {
		t.Fatalf("done: %v %s", out, errText)
	}
	next := waitTool(t, cs, "step_current", map[string]any{"run": "side"}, func(o map[string]any) bool {
		s, _ := o["step"].(map[string]any)
		return s != nil && s["id"] == "use"
	})["step"].(map[string]any)
	if res, out := callRaw(t, cs, "step_report", report(token, "milestone", nil)); !res.IsError || out["code"] != string(Stale) {
		t.Errorf("the run's finished try's token: %v, want stale", out)
	}
	for _, status := range []string{"accepted", "done"} {
		if out, errText := call(t, cs, "step_report", map[string]any{"token": next["token"], "run": "side", "status": status, "summary": "s", "evidence": "e", "risk": "none", "next": "none"}); out["accepted"] != true {
			t.Fatalf("%s: %v %s", status, out, errText)
		}
	}
	st := waitTool(t, cs, "status", map[string]any{"run": "side"}, func(o map[string]any) bool { return o["status"] == planspec.StatusDone })
	for _, s := range st["steps"].([]any) {
		if s := s.(map[string]any); s["tries"] != 1.0 || s["status"] != planspec.StatusDone {
			t.Errorf("step %v", s)
		}
	}
}

func TestServer_RunPulledInProcess(t *testing.T) {
	w := newWorkspace(t)
	driveRun(t, connect(t, NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)}), "worker"))
}

func TestBinary_RunPulledStdio(t *testing.T) {
	t.Parallel()
	cs := stdioSession(t, t.TempDir())
	driveRun(t, cs)
	// The run's notifications name it; the workspace's own run has none.
	waitTool(t, cs, "notifications", map[string]any{"run": "side"}, func(o map[string]any) bool {
		l, _ := o["notifications"].([]any)
		for _, n := range l {
			if n.(map[string]any)["run"] != "side" {
				t.Fatalf("notifications of run side: %v", n)
			}
		}
		return len(l) > 0 && l[len(l)-1].(map[string]any)["status"] == "done"
	})
	if out, _ := call(t, cs, "notifications", map[string]any{"run": "main"}); len(out["notifications"].([]any)) != 0 {
		t.Errorf("notifications of the workspace's own run, which ran nothing: %v", out)
	}
}

// TestBinary_RunPulledOverHTTP: the same against a live watch --listen, over
// streamable HTTP with its token.
func TestBinary_RunPulledOverHTTP(t *testing.T) {
	t.Parallel()
	const token = "the-run-pull-token-0123456789"
	url := listenWatch(t, t.TempDir(), token)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "worker", Version: "1"}, nil).
		Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerTransport{token: token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	driveRun(t, cs)
}

// TestBinary_RunPulledBesideWatch: stepseq mcp beside a live watch acts
// through the files, for the run as for state.json.
func TestBinary_RunPulledBesideWatch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	listenWatch(t, dir, "the-beside-token-0123456789")
	driveRun(t, stdioSession(t, dir))
}

// TestServer_RunCloseAsOffered: beside the in-process sidecar, run_close made
// the moment step_current offers the run's pulled step closes it, every time:
// the run is archived, its state file gone for good, its step no longer
// offered. Five runs, each closed at once.
func TestServer_RunCloseAsOffered(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t)
	cs := connect(t, NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)}), "closer")
	for i := range 5 {
		name := "c" + strconv.Itoa(i)
		if _, errText := call(t, cs, "run_start", map[string]any{"plan": pullPlan, "run": name}); errText != "" {
			t.Fatal(errText)
		}
		waitTool(t, cs, "step_current", map[string]any{"run": name}, func(o map[string]any) bool { return o["step"] != nil })
		res, out := callRaw(t, cs, "run_close", map[string]any{"run": name})
		if run, _ := out["run"].(map[string]any); res.IsError || run["status"] != store.RunClosed {
			t.Fatalf("run_close %s: %v", name, out)
		}
		if _, err := os.Lstat(filepath.Join(w.rt.WS.Dir, "state."+name+".json")); !os.IsNotExist(err) {
			t.Fatalf("state.%s.json is still there (%v)", name, err)
		}
		if res, out := callRaw(t, cs, "step_current", map[string]any{"run": name}); !res.IsError {
			t.Fatalf("step_current of closed run %s: %v", name, out)
		}
	}
	out, _ := call(t, cs, "run_list", map[string]any{"filter": store.RunClosed})
	if runs, _ := out["runs"].([]any); len(runs) != 5 {
		t.Errorf("run_list closed: %v, want the 5 runs", out)
	}
}
