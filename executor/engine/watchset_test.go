package engine

import (
	"slices"
	"testing"

	"github.com/stepseq/stepseq/executor/store"
)

func TestWatchSet(t *testing.T) {
	st := parse(t, `{"plan":{"steps":{
		"a":{"title":"A","instruction":"x","requiredOutputs":["out/report.md"],"on":["notes/**/*.md","data/*.csv","src/*/main.go"]},
		"b":{"title":"B","instruction":"y","when":"exists(\"gate/ok.txt\") && len(glob(\"in/*.json\")) > 0 && len(glob(\"deep/**\")) > 0"}}},
		"stepQueue":["a","b"],"status":"IN_PROGRESS"}`)
	ws := store.Workspace{Dir: "/ws", State: "/ws/state.json"}
	rt := &Runtime{WS: ws}
	conds, err := rt.Conditions(st)
	if err != nil {
		t.Fatal(err)
	}
	paths, trees := WatchSet(ws, "/ws/plans", st, conds)
	wantPaths := []string{".stepseq/triggers", "data", "gate/ok.txt", "in", "out/report.md", "plans", "state.json"}
	wantTrees := []string{"deep", "notes", "src"}
	if !slices.Equal(paths, wantPaths) {
		t.Errorf("paths = %q, want %q", paths, wantPaths)
	}
	if !slices.Equal(trees, wantTrees) {
		t.Errorf("trees = %q, want %q", trees, wantTrees)
	}
}
