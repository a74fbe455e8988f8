package engine

import (
	"slices"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/planspec"
	planpkg "github.com/stepseq/stepseq/planspec/plan"
)

// abort: {when, reason} on the first step is asked before it runs: when it
// holds, the plan is blocked with the reason rendered and no agent launches.
// One that reads the step's own result waits for the step to be verified.
func TestCheck_AbortOnTheFirstStep(t *testing.T) {
	src := "name: guarded\nparams:\n  mode: {type: string, default: go}\nsteps:\n" +
		"  - id: a\n    title: A\n    instruction: write:out/a\n" +
		"    abort: {when: params.mode == \"stop\", reason: \"mode is ${params.mode}\"}\n" +
		"  - id: b\n    title: B\n    instruction: write:out/b\n" +
		"    result: {type: object, properties: {n: {type: integer}}}\n    abort: result.n > 1\n"
	p, err := planpkg.ParsePlan(strings.NewReader(src), "plans/guarded.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode    string
		blocked bool
	}{{"stop", true}, {"go", false}} {
		t.Run(tc.mode, func(t *testing.T) {
			st := p.State("plans/guarded.yaml", "h")
			st.Settings.Params = map[string]any{"mode": tc.mode}
			w := newTestWS(t, string(st.Marshal()))
			if err := w.check(); err != nil {
				t.Fatal(err)
			}
			got := w.read()
			aborted := slices.Contains(got.Blockers, "a: aborted: mode is stop")
			if aborted != tc.blocked || tc.blocked && w.exists("out/a") {
				t.Errorf("mode %s: blockers %q, out/a %v", tc.mode, got.Blockers, w.exists("out/a"))
			}
			if !tc.blocked && got.Run("a").Status != planspec.StatusDone {
				t.Errorf("mode go: a is %s, want DONE", got.Run("a").Status)
			}
		})
	}
}
