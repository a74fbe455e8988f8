package core

import (
	"testing"
	"time"

	"github.com/stepseq/stepseq/planspec"
)

// TestRerun_CountsTheEarlierRunsTries: a re-run keeps in each reset step's
// record the tries of the run it ends, and the try that starts the new run
// carries them, for its logs to be set aside as a run even when that run's
// tries printed nothing; a step reset again before it ran keeps its count.
func TestRerun_CountsTheEarlierRunsTries(t *testing.T) {
	st := &planspec.State{
		Steps:     map[string]*planspec.StepSpec{"a": {Title: "A", Instruction: "x"}, "b": {Title: "B", Instruction: "y"}},
		StepQueue: []string{"a", "b"},
		StepRuns: map[string]*planspec.StepRun{
			"a": {Status: planspec.StatusDone, Tries: 2},
			"b": {Status: planspec.StatusDone, Tries: 3},
		},
		Status: planspec.StatusDone,
	}
	earlier := func(id string) int {
		if a := st.StepRuns[id].Agent; a != nil {
			return a.EarlierTries
		}
		return 0
	}
	if err := Rerun(st, "a"); err != nil {
		t.Fatal(err)
	}
	if earlier("a") != 2 || earlier("b") != 3 {
		t.Fatalf("after a re-run: a counts %d earlier tries, b %d; want 2 and 3", earlier("a"), earlier("b"))
	}
	if try := BeginTry(st, "a", time.Now(), false); try != 1 || earlier("a") != 2 {
		t.Fatalf("the new run's try %d carries %d earlier tries, want try 1 carrying 2", try, earlier("a"))
	}
	st.StepRuns["a"].Status = planspec.StatusDone
	if err := Rerun(st, "a"); err != nil {
		t.Fatal(err)
	}
	if earlier("a") != 1 || earlier("b") != 3 {
		t.Errorf("after a second re-run: a counts %d earlier tries, b (not run since) %d; want 1 and 3", earlier("a"), earlier("b"))
	}
}
