package web

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/engine"
)

// TestWorkspace_ViewGraph: a plan whose steps run side by side is drawn with
// an arrow from each step a step needs, a foreach's instances each a box of
// their own, and the page lays the branches out in one column.
func TestWorkspace_ViewGraph(t *testing.T) {
	dir := t.TempDir()
	state := `{
  "plan": {"steps": {
    "a": {"title": "A", "instruction": "do a", "needs": []},
    "fix": {"title": "Fix ${item}", "instruction": "fix ${item}", "needs": ["a"], "foreach": "params.files"},
    "fix[0]": {"title": "Fix x", "instruction": "fix x", "needs": ["a"], "of": "fix", "index": 0, "item": "x"},
    "fix[1]": {"title": "Fix y", "instruction": "fix y", "needs": ["a"], "of": "fix", "index": 1, "item": "y"},
    "join": {"title": "Join", "instruction": "join", "needs": ["fix"]}}},
  "stepQueue": ["a", "fix[0]", "fix[1]", "join"], "currentStep": 1,
  "stepRuns": {"a": {"status": "DONE", "tries": 1, "phase": "done"}},
  "stepDelayMinutes": 0, "blockers": [], "artifacts": [], "status": "IN_PROGRESS",
  "stepseq": {"name": "fan"}
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
	want := [][2]string{{"a", "fix[0]"}, {"a", "fix[1]"}, {"fix[0]", "join"}, {"fix[1]", "join"}}
	if !slices.Equal(v.Edges, want) {
		t.Errorf("edges %v, want %v", v.Edges, want)
	}
	p := newPage(v, time.Now(), 1000)
	if x0, x1 := p.Graph.Nodes[1].X, p.Graph.Nodes[2].X; x0 != x1 || p.Graph.Nodes[1].Y == p.Graph.Nodes[2].Y {
		t.Errorf("the instances are not side by side in one column: %+v %+v", p.Graph.Nodes[1], p.Graph.Nodes[2])
	}
}
