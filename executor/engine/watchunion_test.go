package engine

import (
	"slices"
	"testing"
)

// TestWatchUnion_Adjust: a run's part changed by deltas is the part set whole
// from the list they lead to, and the union tells the watcher the same gains
// and losses: a path another run still names is neither gained nor lost.
func TestWatchUnion_Adjust(t *testing.T) {
	steps := []struct {
		name           string
		gained, lost   []string
		added, removed []string
	}{
		{name: "a report folder", gained: []string{"r/s1"}, added: []string{"r/s1"}},
		{name: "the next step's", gained: []string{"r/s2"}, lost: []string{"r/s1"}, added: []string{"r/s2"}, removed: []string{"r/s1"}},
		{name: "one the other run names", gained: []string{"b/c"}},
		{name: "lost while the other names it", lost: []string{"b/c"}},
		{name: "one it never named", lost: []string{"x/y"}},
		{name: "all of its own", lost: []string{"a/b", "r/s2"}, removed: []string{"a/b", "r/s2"}},
	}
	u := newWatchUnion()
	u.set("other", []string{"b/c"}, nil)
	adjusted := newWatchUnion()
	adjusted.set("other", []string{"b/c"}, nil)
	if added, removed, _ := adjusted.set("run", []string{"a/b"}, []string{"t"}); !slices.Equal(added, []string{"a/b"}) || removed != nil {
		t.Fatalf("first set: added %v, removed %v", added, removed)
	}
	list := []string{"a/b"}
	u.set("run", list, []string{"t"})
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			added, removed := adjusted.adjust("run", st.gained, st.lost)
			if !slices.Equal(added, st.added) || !slices.Equal(removed, st.removed) {
				t.Errorf("adjust: added %v, removed %v; want %v, %v", added, removed, st.added, st.removed)
			}
			list = slices.DeleteFunc(list, func(p string) bool { return slices.Contains(st.lost, p) })
			list = append(list, st.gained...)
			slices.Sort(list)
			list = slices.Compact(list)
			added, removed, _ = u.set("run", list, []string{"t"})
			if !slices.Equal(added, st.added) || !slices.Equal(removed, st.removed) {
				t.Errorf("set: added %v, removed %v; want %v, %v", added, removed, st.added, st.removed)
			}
			for _, p := range []string{"a/b", "b/c", "r/s1", "r/s2", "r", "t/x"} {
				if got, want := sortedOwners(adjusted, p), sortedOwners(u, p); !slices.Equal(got, want) {
					t.Errorf("owners of %s: %v after adjust, %v after set", p, got, want)
				}
			}
			gotPaths, gotTrees := adjusted.all()
			wantPaths, wantTrees := u.all()
			if !slices.Equal(gotPaths, wantPaths) || !slices.Equal(gotTrees, wantTrees) {
				t.Errorf("the union holds %v %v after adjust, %v %v after set", gotPaths, gotTrees, wantPaths, wantTrees)
			}
		})
	}
	if _, ok := adjusted.parts["run"]; !ok {
		t.Error("a part left with trees only was dropped")
	}
}

func sortedOwners(u watchUnion, p string) []string {
	out := u.ownersOf(p)
	slices.Sort(out)
	return out
}
