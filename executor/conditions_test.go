package executor

import (
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
