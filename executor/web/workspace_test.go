package web

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/engine"
)

// TestWorkspace_View: the view of a workspace read from its files: a dispatched
// step of a plan without reports shows as running, a done step's last report
// and the running try's log tail come from the state and .stepseq/logs, and the
// edges follow the queue.
func TestWorkspace_View(t *testing.T) {
	dir := t.TempDir()
	state := `{
  "plan": {"steps": {"a": {"title": "A", "instruction": "do a"}, "b": {"title": "B", "instruction": "do b"}, "c": {"title": "C", "instruction": "do c"}}},
  "stepQueue": ["a", "b", "c"], "currentStep": 1,
  "stepRuns": {
    "a": {"status": "DONE", "tries": 1, "phase": "done", "reports": [
      {"time": "2026-02-10T21:31:00.000000+00:00", "try": 1, "status": "done", "summary": "a is done", "evidence": "a.txt", "risk": "none", "next": "none"}]},
    "b": {"status": "IN_PROGRESS", "tries": 2, "phase": "dispatching"}},
  "stepDelayMinutes": 0, "blockers": [], "artifacts": [], "status": "IN_PROGRESS",
  "stepseq": {"name": "three"}
}`
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	rt, err := engine.NewRuntime(filepath.Join(dir, "state.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	log := rt.WS.LogPath("b", 2)
	if err := os.MkdirAll(filepath.Dir(log), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(log, []byte("0123456789working on b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	v := NewWorkspace(rt, 3, 13).View()
	if v.Plan != "three" || len(v.Steps) != 3 || v.Reports {
		t.Fatalf("view %+v", v)
	}
	a, b, c := v.Steps[0], v.Steps[1], v.Steps[2]
	if a.Phase != PhaseDone || a.LastReport == nil || a.LastReport.Summary != "a is done" || a.LastReport.Time.IsZero() {
		t.Errorf("step a: %+v, report %+v", a, a.LastReport)
	}
	if b.Phase != PhaseInProgress || phaseLabel(b.Phase, v.Reports) != "running" || b.Tries != 2 || b.LogTail != "working on b\n" {
		t.Errorf("step b: %+v", b)
	}
	if c.Phase != PhasePlanned {
		t.Errorf("step c: %+v", c)
	}
	if want := [][2]string{{"a", "b"}, {"b", "c"}}; len(v.Edges) != 2 || v.Edges[0] != want[0] || v.Edges[1] != want[1] {
		t.Errorf("edges %v, want %v", v.Edges, want)
	}
}

// A plan held by a blocker shows a BLOCKED badge, not the IN_PROGRESS its state
// file says.
func TestWorkspace_BlockedPlanBadge(t *testing.T) {
	dir := t.TempDir()
	state := `{"plan": {"steps": {"a": {"title": "A", "instruction": "do a"}}}, "stepQueue": ["a"], "currentStep": 0,
  "stepRuns": {"a": {"status": "FAILED", "tries": 3, "error": "boom"}},
  "stepDelayMinutes": 0, "blockers": ["a: max retries (3) exceeded"], "artifacts": [], "status": "IN_PROGRESS"}`
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	rt, err := engine.NewRuntime(filepath.Join(dir, "state.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if v := NewWorkspace(rt, 3, 13).View(); v.Status != core.RunBlocked {
		t.Errorf("badge %q, want %s", v.Status, core.RunBlocked)
	}
}

// TestWorkspace_StepBlocker: each step shows its own blocker, the one that
// begins with its id: step b, whose id begins build's, never takes build's
// blocker, and a blocked record the original wrote shows as blocked.
func TestWorkspace_StepBlocker(t *testing.T) {
	dir := t.TempDir()
	state := `{"plan": {"steps": {"b": {"title": "B", "instruction": "do b"}, "build": {"title": "Build", "instruction": "build"}}},
  "stepQueue": ["b", "build"], "currentStep": 1,
  "stepRuns": {"b": {"status": "FAILED", "tries": 1, "error": "b's own error"}, "build": {"status": "FAILED", "tries": 3, "error": "boom"}},
  "stepDelayMinutes": 0, "blockers": ["build: max retries (3) exceeded"], "artifacts": [], "status": "IN_PROGRESS"}`
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	rt, err := engine.NewRuntime(filepath.Join(dir, "state.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	v := NewWorkspace(rt, 3, 13).View()
	b, build := v.Steps[0], v.Steps[1]
	if b.Blocker != "" || b.Phase != PhasePlanned {
		t.Errorf("step b: phase %q, blocker %q; want planned and no blocker (build's is not b's)", b.Phase, b.Blocker)
	}
	if build.Blocker != "build: max retries (3) exceeded" || build.Phase != PhaseBlocked {
		t.Errorf("step build: phase %q, blocker %q; want blocked by its max retries", build.Phase, build.Blocker)
	}
}

// A plan's params and, once it ended, its summary show under its name.
func TestWorkspace_ParamsAndSummary(t *testing.T) {
	dir := t.TempDir()
	state := `{"plan": {"steps": {"a": {"title": "A", "instruction": "do a"}}}, "stepQueue": ["a"], "currentStep": 1,
  "stepRuns": {"a": {"status": "DONE", "tries": 1}}, "stepDelayMinutes": 0, "blockers": [], "artifacts": [], "status": "DONE",
  "stepseq": {"name": "review", "params": {"target": "src", "max": 3}, "summary": {"fixed": "2"}, "summaryValues": {"fixed": 2, "doc": "<r.md>"}}}`
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	rt, err := engine.NewRuntime(filepath.Join(dir, "state.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	v := NewWorkspace(rt, 3, 13).View()
	if want := []Field{{"max", "3"}, {"target", "src"}}; !slices.Equal(v.Params, want) {
		t.Errorf("params %v, want %v", v.Params, want)
	}
	if want := []Field{{"doc", "<r.md>"}, {"fixed", "2"}}; !slices.Equal(v.Summary, want) {
		t.Errorf("summary %v, want %v", v.Summary, want)
	}
	var buf strings.Builder
	if err := tmpl().ExecuteTemplate(&buf, "live", pageData{Page: newPage(v, time.Now(), 100)}); err != nil {
		t.Fatal(err)
	}
	if html := buf.String(); !strings.Contains(html, `<p class="fields" data-summary>summary: <code>doc</code> = <code>&lt;r.md&gt;</code> <code>fixed</code> = <code>2</code></p>`) ||
		!strings.Contains(html, `<code>target</code> = <code>src</code>`) {
		t.Errorf("the page shows:\n%s", html)
	}
}

// TestWorkspace_OtherRuns: the page lists the runs beside state.json, a
// broken run file among them with its reason, and a notification
// about a run names it.
func TestWorkspace_OtherRuns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	one := `{"plan": {"steps": {"a": {"title": "A", "instruction": "do a"}, "b": {"title": "B", "instruction": "do b"}}}, "stepQueue": ["a", "b"], "currentStep": 1,
  "stepRuns": {"a": {"status": "DONE", "tries": 1}}, "stepDelayMinutes": 0, "blockers": [], "artifacts": [], "status": "IN_PROGRESS", "stepseq": {"name": "rev"}}`
	for name, content := range map[string]string{"state.json": one, "state.t1.json": one, "state.bad.json": "{\n oops"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rt, err := engine.NewRuntime(filepath.Join(dir, "state.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	v := NewWorkspace(rt, 3, 13).View()
	if len(v.Runs) != 2 || v.Runs[0].Name != "bad" || v.Runs[0].Status != "invalid" || v.Runs[1] != (RunView{Name: "t1", Plan: "rev", Status: "active", Done: 1, Steps: 2, Current: "b"}) {
		t.Fatalf("runs %+v", v.Runs)
	}
	v.Notifications = []NoteView{{Step: "b", Try: 1, Status: "dispatching", Run: "t1"}}
	var buf strings.Builder
	if err := tmpl().ExecuteTemplate(&buf, "live", pageData{Page: newPage(v, time.Now(), 100)}); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	for _, want := range []string{`<tr data-run="t1">`, `<td class="num">1/2</td>`, `state.bad.json: not valid JSON at line 2`, `<span class="muted" data-run>t1:</span> b`} {
		if !strings.Contains(html, want) {
			t.Errorf("the page does not show %q:\n%s", want, html)
		}
	}
}

// TestWorkspace_ViewLoop: a repeat group of the state is a loop of the view:
// its steps, its label saying the round, and its back edge.
func TestWorkspace_ViewLoop(t *testing.T) {
	dir := t.TempDir()
	state := `{
  "plan": {"steps": {"a": {"title": "A", "instruction": "do a"}, "b": {"title": "B", "instruction": "do b"}, "c": {"title": "C", "instruction": "do c"}}},
  "stepQueue": ["a", "b", "c"], "currentStep": 0,
  "stepRuns": {"a": {"status": "PENDING", "tries": 0}},
  "stepDelayMinutes": 0, "blockers": [], "artifacts": [], "status": "IN_PROGRESS",
  "stepseq": {"name": "loop", "groups": [{"id": "rounds", "max": "5", "steps": ["a", "b"]}],
    "loops": {"rounds": {"round": 2, "max": 5}}}
}`
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	rt, err := engine.NewRuntime(filepath.Join(dir, "state.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	v := NewWorkspace(rt, 3, 13).View()
	if len(v.Loops) != 1 || !slices.Equal(v.Loops[0].Steps, []string{"a", "b"}) || v.Loops[0].Label != "rounds · round 2/5" {
		t.Fatalf("loops %+v", v.Loops)
	}
	if !slices.Contains(v.Edges, [2]string{"b", "a"}) {
		t.Errorf("edges %v: no back edge from b to a", v.Edges)
	}
}

// TestWorkspace_GatedStepWaits: a step the plan reached whose when: is false
// shows as waiting, with what it waits for, in the words status uses; the page
// says so in the step's row. The step after it is still planned.
func TestWorkspace_GatedStepWaits(t *testing.T) {
	dir := t.TempDir()
	state := `{"plan": {"steps": {"a": {"title": "A", "instruction": "do a"},
    "b": {"title": "B", "instruction": "do b", "when": "exists(\"go.txt\")"}, "c": {"title": "C", "instruction": "do c"}}},
  "stepQueue": ["a", "b", "c"], "currentStep": 1, "stepRuns": {"a": {"status": "DONE", "tries": 1}},
  "stepDelayMinutes": 0, "blockers": [], "artifacts": [], "status": "IN_PROGRESS", "stepseq": {"name": "gated"}}`
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	rt, err := engine.NewRuntime(filepath.Join(dir, "state.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	const waits = `waiting for when: exists("go.txt")`
	v := NewWorkspace(rt, 3, 13).View()
	if b := v.Steps[1]; b.Phase != PhaseWaiting || b.Waits != waits {
		t.Errorf("step b: phase %q, waits %q; want waiting, %q", b.Phase, b.Waits, waits)
	}
	if c := v.Steps[2]; c.Phase != PhasePlanned || c.Waits != "" {
		t.Errorf("step c: phase %q, waits %q; want planned, nothing", c.Phase, c.Waits)
	}
	body := get(t, New(newFakeSource(v), Options{}), http.MethodGet, "/").Body.String()
	for _, w := range []string{`data-step="b" data-phase="waiting"`, `<div class="waits" data-waits>waiting for when: exists(&#34;go.txt&#34;)</div>`} {
		if !strings.Contains(body, w) {
			t.Errorf("the page lacks %q", w)
		}
	}
}
