package engine

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/planspec"
)

// A plan dropped in plans/ runs on its params' defaults: one with a required
// param is refused with that reason, in its record; one whose params all have
// defaults runs, its agent gets the rendered prompt and state.json holds it.
func TestSidecar_PlanParamsAndTemplates(t *testing.T) {
	w := newTestWS(t, "")
	w.startSidecar(SidecarOptions{})
	w.writeFile("plans/needs.yaml", "params: {ticket: {type: string}}\nsteps:\n  - id: a\n    title: A\n    instruction: write:a.txt ${params.ticket}\n")
	var rec core.PlanRecord
	waitFor(t, func() bool {
		var ok bool
		rec, ok = w.chain().WS.ReadPlanRecord("needs")
		return ok && rec.Status == core.PlanInvalid
	})
	if !slices.ContainsFunc(rec.Errors, func(e string) bool {
		return strings.Contains(e, "plans/needs.yaml") && strings.Contains(e, "params.ticket: required: the plan gives no default")
	}) {
		t.Errorf("errors = %q, want the required param named", rec.Errors)
	}
	if w.exists("state.json") {
		t.Error("a refused plan wrote state.json")
	}

	w.writeFile("plans/runs.yaml", `params:
  target: {type: string, default: src}
  tags: {type: array, default: [a, b]}
steps:
  - id: one
    title: One on ${params.target}
    instruction: 'argsfile:args.txt ${params.target} ${params.tags} $${kept}'
`)
	st := w.waitState("runs DONE", func(st *planspec.State) bool { return st.Settings.Name == "runs" && done(st) })
	const want = `argsfile:args.txt src ["a","b"] ${kept}`
	args, err := os.ReadFile(w.path("args.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(string(args), "\n"); lines[len(lines)-1] != want {
		t.Errorf("the agent's prompt = %q, want %q", lines[len(lines)-1], want)
	}
	spec := st.Steps["one"]
	if spec.Instruction != want || spec.Title != "One on src" {
		t.Errorf("state.json holds instruction %q, title %q; want the rendered texts", spec.Instruction, spec.Title)
	}
	if spec.InstructionTemplate != "argsfile:args.txt ${params.target} ${params.tags} $${kept}" {
		t.Errorf("instructionTemplate = %q", spec.InstructionTemplate)
	}
	if got := st.Settings.Params["target"]; got != "src" {
		t.Errorf("params = %v", st.Settings.Params)
	}
}
