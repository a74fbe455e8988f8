package plan

import (
	"slices"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/planspec"
)

func TestPlan_GraphQueue(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		queue      []string
		needs      map[string][]string
	}{
		{"line", `
steps:
  - {id: a, title: A, instruction: a}
  - {id: b, title: B, instruction: b}
`, []string{"a", "b"}, map[string][]string{"a": nil, "b": nil}},
		{"forward need", `
steps:
  - {id: a, title: A, instruction: a, needs: [c]}
  - {id: b, title: B, instruction: b, needs: []}
  - {id: c, title: C, instruction: c, needs: []}
  - {id: d, title: D, instruction: d}
`, []string{"b", "c", "a", "d"}, map[string][]string{"a": {"c"}, "b": {}, "c": {}, "d": {"c"}}},
		{"group is one node", `
steps:
  - {id: a, title: A, instruction: a}
  - id: g
    repeat: {max: 2}
    needs: [a]
    steps:
      - {id: g1, title: G1, instruction: g1}
      - {id: g2, title: G2, instruction: g2}
  - {id: side, title: S, instruction: s, needs: [a]}
  - {id: z, title: Z, instruction: z, needs: [g, side]}
`, []string{"a", "g1", "g2", "side", "z"}, map[string][]string{"a": {}, "g1": {"a"}, "g2": {"g1"}, "side": {"a"}, "z": {"g2", "side"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePlan(strings.NewReader(tc.yaml), "p.yaml")
			if err != nil {
				t.Fatal(err)
			}
			st := p.State("p.yaml", "h")
			if !slices.Equal(st.StepQueue, tc.queue) {
				t.Errorf("queue %v, want %v", st.StepQueue, tc.queue)
			}
			for id, want := range tc.needs {
				got := st.Steps[id].Needs
				if !slices.Equal(got, want) || (got == nil) != (want == nil) {
					t.Errorf("%s needs %#v, want %#v", id, got, want)
				}
			}
			if st.IsGraph() != (tc.needs["a"] != nil) {
				t.Errorf("IsGraph %v", st.IsGraph())
			}
		})
	}
}

func TestPlan_WorktreeResolved(t *testing.T) {
	p, err := ParsePlan(strings.NewReader(`
worktree: true
merge: none
steps:
  - {id: a, title: A, instruction: a}
  - {id: b, title: B, instruction: b, worktree: false}
  - {id: c, title: C, instruction: c, merge: auto}
`), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]planspec.Graph{}
	for _, s := range p.Steps {
		got[s.ID] = s.Spec.Graph
	}
	if g := got["a"]; !g.Worktree || g.Merge != planspec.MergeNone {
		t.Errorf("a: %+v", g)
	}
	if g := got["b"]; g.Worktree {
		t.Errorf("b: %+v", g)
	}
	if g := got["c"]; !g.Worktree || g.Merge != planspec.MergeAuto {
		t.Errorf("c: %+v", g)
	}
	if !p.UsesWorktrees() {
		t.Error("UsesWorktrees false")
	}
}
