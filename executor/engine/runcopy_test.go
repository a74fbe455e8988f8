package engine

import (
	"os"
	"testing"

	"github.com/stepseq/stepseq/executor/store"
)

// A backup copy of a run's state (cp state.json state.orig.json) carries that
// run's id: it is listed as a copy, with how to start it as a run of its own,
// and the sidecar launches nothing for it. A run file with its own id beside it
// is driven as any run.
func TestSidecar_CopyOfARunIsNotDriven(t *testing.T) {
	t.Parallel()
	state := func(id, name string) string {
		return plan(`"stepseq":{"runId":"`+id+`"}`, `"instruction":"write:out/`+name+`","requiredOutputs":["out/`+name+`"]`)
	}
	w := newTestWS(t, state("main:0a0b0c", "main"))
	w.writeRun("orig", state("main:0a0b0c", "orig"))
	w.writeRun("own", state("own:0d0e0f", "own"))
	before, err := os.ReadFile(w.path("state.orig.json"))
	if err != nil {
		t.Fatal(err)
	}
	w.startSidecar(SidecarOptions{})
	w.waitState("main DONE", done)
	w.waitRun("own", "DONE", done)
	if w.exists("out/orig") || w.exists(".stepseq/runs/orig/logs") {
		t.Error("the copy's agent ran")
	}
	if after, _ := os.ReadFile(w.path("state.orig.json")); string(after) != string(before) {
		t.Errorf("the copy was written:\n%s", after)
	}
	runs, err := store.ListRuns(store.Workspace{Dir: w.dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		switch r.Name {
		case "orig":
			if r.Status != store.RunCopy || r.CopyOf != store.MainRun || r.Hint == "" {
				t.Errorf("run orig: %+v, want a copy of main with a hint", r)
			}
		case "own", store.MainRun:
			if r.Status != store.RunDone {
				t.Errorf("run %s: %+v, want done", r.Name, r)
			}
		}
	}
}
