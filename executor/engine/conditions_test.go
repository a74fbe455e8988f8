package engine

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestConditions_SeeTheInputsTime: a condition's now() is the time the machine
// handles the input at, the one it is given, never the wall clock read on the
// way: a scenario that scripts the time scripts what conditions see.
func TestConditions_SeeTheInputsTime(t *testing.T) {
	dir := t.TempDir()
	rt, err := NewRuntime(filepath.Join(dir, "state.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	rt.Now = func() time.Time { t.Fatal("a condition read the runtime's clock"); return time.Time{} }
	st := parse(t, `{"plan":{"steps":{"a":{"title":"A","instruction":"do a","when":"now().Year() == 2001","check":"now().Year() == 2002"}}},
 "stepQueue":["a"],"currentStep":0,"stepRuns":{},"stepDelayMinutes":0,"blockers":[],"status":"IN_PROGRESS"}`)
	conds, err := rt.Conditions(st)
	if err != nil {
		t.Fatal(err)
	}
	y2001 := time.Date(2001, 6, 1, 0, 0, 0, 0, time.UTC)
	y2002 := y2001.AddDate(1, 0, 0)
	if ok, err := conds.Cond(y2001, "a", "when"); err != nil || !ok {
		t.Errorf("when at 2001 = %v, %v; want true", ok, err)
	}
	if ok, err := conds.Cond(y2002, "a", "when"); err != nil || ok {
		t.Errorf("when at 2002 = %v, %v; want false", ok, err)
	}
	if ok, err := conds.Check(y2002, "a")(); err != nil || !ok {
		t.Errorf("check at 2002 = %v, %v; want true", ok, err)
	}
}

// TestConditions_Reads: what a step's gate reads, for telling its agent which
// change started it: when's and skip's literal paths and globs, not check's;
// unknown once a path is built at run time.
func TestConditions_Reads(t *testing.T) {
	rt, err := NewRuntime(filepath.Join(t.TempDir(), "state.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	st := parse(t, `{"plan":{"steps":{
 "a":{"title":"A","instruction":"do a","when":"exists(\"go.txt\")","skip":"len(glob(\"skip/*\")) > 0","check":"exists(\"out.txt\")"},
 "b":{"title":"B","instruction":"do b","when":"exists(step.title)"},
 "c":{"title":"C","instruction":"do c"}}},
 "stepQueue":["a","b","c"],"currentStep":0,"stepRuns":{},"stepDelayMinutes":0,"blockers":[],"status":"IN_PROGRESS"}`)
	conds, err := rt.Conditions(st)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"a": "[go.txt] [skip/*] true", "b": "[] [] false", "c": "[] [] true"} {
		paths, globs, known := conds.Reads(id)
		if got := fmt.Sprint(paths, " ", globs, " ", known); got != want {
			t.Errorf("Reads(%s) = %s, want %s", id, got, want)
		}
	}
}
