package core

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stepseq/stepseq/planspec"
)

// writtenBudgets are the run's tries budget and its applied ids in each
// state write among effs, as the file says them.
func writtenBudgets(t *testing.T, effs []Effect) (tries []int, applied [][]string) {
	t.Helper()
	for _, e := range effs {
		if w, ok := e.(WriteState); ok {
			st, err := planspec.ParseStateBytes(w.State.Marshal(), "written")
			if err != nil {
				t.Fatal(err)
			}
			tries = append(tries, st.Settings.Budget.Tries)
			applied = append(applied, st.Settings.Applied)
		}
	}
	return tries, applied
}

// TestMachine_AppliedIDWithItsEffect: a budget change that carries an id,
// given while an agent runs, is applied once the agent ends, and the write
// that holds the change lists its id; the same command given again is not
// applied again.
func TestMachine_AppliedIDWithItsEffect(t *testing.T) {
	r := newRig(t, planAB(`,"stepseq":{"budget":{"tries":5}}`), false)
	if _, ok := started(r.take()); !ok {
		t.Fatal("a not started")
	}
	raise := Trigger{From: "fleet", Budget: "tries=+2", ID: "00000000000000000001-c0ffee00"}
	r.feed(TriggersIn{Triggers: []Trigger{raise}})
	if tries, _ := writtenBudgets(t, r.take()); len(tries) != 0 {
		t.Fatalf("state written while the agent runs: tries %v", tries)
	}
	r.feed(AgentExited{Step: "a", Try: 1, Exit: Exit{Code: 0}})
	tries, applied := writtenBudgets(t, r.take())
	if len(tries) == 0 {
		t.Fatal("no state written once the agent ended")
	}
	for i := range tries {
		listed := slices.Contains(applied[i], raise.ID)
		if (tries[i] == 7) != listed {
			t.Errorf("write %d: tries %d, applied %q: want the change and its id in one write", i, tries[i], applied[i])
		}
	}
	if b := r.m.State().Settings.Budget.Tries; b != 7 {
		t.Fatalf("tries budget %d, want 7", b)
	}
	r.feed(TriggersIn{Triggers: []Trigger{raise}})
	r.feed(AgentExited{Step: "b", Try: 1, Exit: Exit{Code: 0}})
	if b := r.m.State().Settings.Budget.Tries; b != 7 {
		t.Errorf("tries budget %d after the command came again, want 7: applied once", b)
	}
	if got := r.m.State().Settings.Applied; !slices.Equal(got, []string{raise.ID}) {
		t.Errorf("applied %q, want the one id", got)
	}
}

// TestMachine_AppliedKeepsTheNewest: the state lists only the newest
// planspec.MaxAppliedKept ids.
func TestMachine_AppliedKeepsTheNewest(t *testing.T) {
	r := newRig(t, planAB(`,"stepseq":{"budget":{"tries":5}}`), true)
	r.feed(AgentExited{Step: "a", Try: 1, Exit: Exit{Code: 0}})
	r.feed(AgentExited{Step: "b", Try: 1, Exit: Exit{Code: 0}})
	n := planspec.MaxAppliedKept + 6
	for i := range n {
		r.feed(TriggersIn{Triggers: []Trigger{{From: "fleet", Budget: "tries=+1", ID: fmt.Sprintf("id%03d", i)}}})
	}
	got := r.m.State().Settings.Applied
	want := make([]string, 0, planspec.MaxAppliedKept)
	for i := n - planspec.MaxAppliedKept; i < n; i++ {
		want = append(want, fmt.Sprintf("id%03d", i))
	}
	if !slices.Equal(got, want) {
		t.Errorf("applied %q, want the newest %d: %q", got, planspec.MaxAppliedKept, want)
	}
	if b := r.m.State().Settings.Budget.Tries; b != 5+n {
		t.Errorf("tries budget %d, want %d", b, 5+n)
	}
}

// TestMachine_AppliedOnceWhenHandedTwiceBeforeApplied: the same command
// handed twice while an agent runs (both queued before either is applied)
// is applied once.
func TestMachine_AppliedOnceWhenHandedTwiceBeforeApplied(t *testing.T) {
	r := newRig(t, planAB(`,"stepseq":{"budget":{"tries":5}}`), false)
	if _, ok := started(r.take()); !ok {
		t.Fatal("a not started")
	}
	raise := Trigger{From: "fleet", Budget: "tries=+2", ID: "00000000000000000002-c0ffee00"}
	r.feed(TriggersIn{Triggers: []Trigger{raise}})
	r.feed(TriggersIn{Triggers: []Trigger{raise}})
	r.feed(AgentExited{Step: "a", Try: 1, Exit: Exit{Code: 0}})
	if b := r.m.State().Settings.Budget.Tries; b != 7 {
		t.Fatalf("tries budget %d, want 7: one command, applied once", b)
	}
}
