package mcp

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/store"
)

// paramsPlan is a pulled plan with params.
const paramsPlan = `agent: mcp
params:
  topic: {type: string}
  depth: {type: integer, default: 2}
steps:
  - id: look
    title: Look
    instruction: Look into the topic
`

// TestServer_Runs: run_start starts runs beside the workspace's own, by a
// plan's name or as YAML, with params; run_list lists and filters them; the
// tools that touch a run take run.
func TestServer_Runs(t *testing.T) {
	w := newWorkspace(t)
	cs := connect(t, NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)}), "runner")
	plans := filepath.Join(w.rt.WS.Dir, "plans")
	if err := os.MkdirAll(plans, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plans, "study.yaml"), []byte(paramsPlan), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errText := call(t, cs, "run_start", map[string]any{"plan": "study", "params": map[string]any{"topic": "owls"}, "run": "owls"})
	run, _ := out["run"].(map[string]any)
	if errText != "" || run["name"] != "owls" || run["state"] != "state.owls.json" || run["status"] != store.RunActive ||
		run["params"].(map[string]any)["depth"] != 2.0 || run["steps"] != 1.0 {
		t.Fatalf("run_start by name: %v %s", out, errText)
	}
	if _, err := os.Stat(filepath.Join(w.rt.WS.Dir, "state.owls.json")); err != nil {
		t.Fatal(err)
	}
	out, errText = call(t, cs, "run_start", map[string]any{"plan": pullPlan})
	if run, _ := out["run"].(map[string]any); errText != "" || run["name"] != "plan" {
		t.Fatalf("run_start of YAML: %v %s", out, errText)
	}
	if res, out := callRaw(t, cs, "run_start", map[string]any{"plan": "study", "params": map[string]any{"topic": "x"}, "run": "owls"}); !res.IsError ||
		out["code"] != string(Busy) || !strings.Contains(strings.Join(toStrings(out["reasons"]), ""), "a run of that name exists: owls (plan study, started through MCP;") {
		t.Errorf("a name taken: %v, want busy naming its run's plan", out)
	}
	if res, out := callRaw(t, cs, "run_start", map[string]any{"plan": "study"}); !res.IsError || out["code"] != string(InvalidParams) ||
		!strings.Contains(strings.Join(toStrings(out["reasons"]), ""), "params.topic: required") {
		t.Errorf("a required param left out: %v", out)
	}

	names := func(filter string) []string {
		out, errText := call(t, cs, "run_list", map[string]any{"filter": filter})
		if errText != "" {
			t.Fatal(errText)
		}
		var l []string
		for _, r := range out["runs"].([]any) {
			l = append(l, r.(map[string]any)["name"].(string))
		}
		return l
	}
	if got := strings.Join(names(""), " "); got != "owls plan" {
		t.Errorf("run_list: %s, want owls plan", got)
	}
	if got := strings.Join(names("ow"), " "); got != "owls" {
		t.Errorf("run_list ow: %s", got)
	}
	if got := names("done"); len(got) != 0 {
		t.Errorf("run_list done: %v", got)
	}

	st, errText := call(t, cs, "status", map[string]any{"run": "owls"})
	if errText != "" || st["plan"] != "study" || !strings.HasSuffix(st["state"].(string), "state.owls.json") || len(st["steps"].([]any)) != 1 {
		t.Errorf("status of a run: %v %s", st, errText)
	}
	if main, _ := call(t, cs, "status", map[string]any{}); len(main["steps"].([]any)) != 0 {
		t.Errorf("status of the workspace's own run, which has no plan: %v", main)
	}
	if out, errText := call(t, cs, "logs", map[string]any{"run": "owls", "step": "look"}); errText != "" || len(toStrings(out["lines"])) != 0 {
		t.Errorf("logs of a run's pulled step (no output): %v %s", out, errText)
	}
	if res, out := callRaw(t, cs, "logs", map[string]any{"run": "owls", "step": "fetch"}); !res.IsError || out["code"] != string(NotFound) {
		t.Errorf("logs of another run's step: %v", out)
	}
	if out, errText := call(t, cs, "trigger", map[string]any{"run": "owls", "step": "look"}); errText != "" || out["queued"] != true {
		t.Errorf("trigger in a run: %v %s", out, errText)
	}
	// The trigger is the run's. The sidecar takes it from the run's folder at
	// once; while the run's step is offered (look is dispatched, pulled) the
	// run's machine holds it, and applies it once the step is done: the run's
	// journal then records it. A trigger taken before the dispatch is applied
	// at once, and journaled the same way.
	cur := waitTool(t, cs, "step_current", map[string]any{"run": "owls"}, func(o map[string]any) bool { return o["step"] != nil })["step"].(map[string]any)
	if cur["id"] != "look" {
		t.Fatalf("step_current of run owls: %v", cur)
	}
	for _, status := range []string{"accepted", "done"} {
		if out, errText := call(t, cs, "step_report", report(cur["token"].(string), status, nil)); out["accepted"] != true {
			t.Fatalf("%s: %v %s", status, out, errText)
		}
	}
	journal := filepath.Join(w.rt.WS.Dir, ".stepseq", "runs", "owls", "journal.jsonl")
	triggered := func() bool {
		data, _ := os.ReadFile(journal)
		for _, line := range bytes.Split(data, []byte("\n")) {
			if bytes.Contains(line, []byte(`"event":"trigger"`)) && bytes.Contains(line, []byte(`"step":"look"`)) {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(effectWait); !triggered(); {
		if time.Now().After(deadline) {
			data, _ := os.ReadFile(journal)
			t.Fatalf("the run's trigger is not in its journal:\n%s", data)
		}
		time.Sleep(5 * time.Millisecond)
	}

	feed := `{"id":"a1","time":"2026-02-10T21:30:00Z","step":"s1","status":"done"}` + "\n" +
		`{"id":"a2","time":"2026-02-10T21:30:01Z","step":"look","status":"dispatching","run":"owls"}` + "\n"
	if err := os.WriteFile(filepath.Join(w.rt.WS.Dir, store.MetaDir, "notifications.jsonl"), []byte(feed), 0o644); err != nil {
		t.Fatal(err)
	}
	for run, want := range map[string]string{"": "a1 a2", "owls": "a2", "main": "a1", "plan": ""} {
		out, errText := call(t, cs, "notifications", map[string]any{"run": run})
		var ids []string
		for _, n := range out["notifications"].([]any) {
			ids = append(ids, n.(map[string]any)["id"].(string))
		}
		if errText != "" || strings.Join(ids, " ") != want {
			t.Errorf("notifications of run %q: %v %s, want %s", run, ids, errText, want)
		}
	}
}

// TestServer_RunClose: run_close archives a run; the tools then refuse it with
// closed, and run_list shows it closed. (Here no sidecar holds the workspace:
// run_close takes the lock and closes it itself.)
func TestServer_RunClose(t *testing.T) {
	dir := t.TempDir()
	rt, eng := filesRuntime(t, filepath.Join(dir, "state.json"))
	cs := connect(t, NewServer(Options{Runtime: rt, Engine: eng}), "closer")
	if _, errText := call(t, cs, "run_start", map[string]any{"plan": pullPlan, "run": "r1"}); errText != "" {
		t.Fatal(errText)
	}
	res, out := callRaw(t, cs, "run_close", map[string]any{"run": "r1"})
	if run, _ := out["run"].(map[string]any); res.IsError || run["status"] != store.RunClosed {
		t.Fatalf("run_close: %v", out)
	}
	conforms(t, toolSchemas(t, cs), "run_close", res)
	if _, err := os.Stat(filepath.Join(dir, "state.r1.json")); !os.IsNotExist(err) {
		t.Errorf("state.r1.json is still there (%v)", err)
	}
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"status", map[string]any{"run": "r1"}},
		{"step_current", map[string]any{"run": "r1"}},
		{"retry", map[string]any{"run": "r1", "step": "fetch"}},
	} {
		if res, out := callRaw(t, cs, tc.tool, tc.args); !res.IsError || out["code"] != string(Closed) {
			t.Errorf("%s of a closed run: %v, want refused with code closed", tc.tool, out)
		}
	}
	// Closing twice is an answer, not an error.
	if out, errText := call(t, cs, "run_close", map[string]any{"run": "r1"}); errText != "" || out["run"].(map[string]any)["status"] != store.RunClosed {
		t.Errorf("run_close of a closed run: %v %s, want the closed run", out, errText)
	}
	if out, _ := call(t, cs, "run_list", map[string]any{"filter": "closed"}); len(out["runs"].([]any)) != 1 {
		t.Errorf("run_list closed: %v", out)
	}
}
