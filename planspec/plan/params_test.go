package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stepseq/stepseq/planspec"
)

const paramsPlan = `name: review
params:
  max_rounds: {type: integer, default: 5, minimum: 1, maximum: 10}
  target: {type: string, default: "."}
  ticket: {type: object, required: [id], properties: {id: {type: string}}}
steps:
  - id: review
    title: Review ${params.target}
    instruction: Review ${params.target} for ticket ${params.ticket.id}, at most ${params.max_rounds} rounds.
    when: params.max_rounds > 0
`

func mustParse(t *testing.T, src string) *Plan {
	t.Helper()
	p, err := ParsePlan(strings.NewReader(src), "plans/p.yaml")
	if err != nil {
		t.Fatalf("ParsePlan: %v", err)
	}
	return p
}

func TestParsePlan_Params(t *testing.T) {
	p := mustParse(t, paramsPlan)
	if got := p.ParamNames(); !cmp.Equal(got, []string{"max_rounds", "target", "ticket"}) {
		t.Fatalf("params %v", got)
	}
	if !p.Params[0].HasDefault || p.Params[0].Default != 5 && p.Params[0].Default != float64(5) {
		t.Errorf("max_rounds default %#v", p.Params[0].Default)
	}
	if p.Params[2].HasDefault {
		t.Errorf("ticket has no default, got %#v", p.Params[2].Default)
	}
	st := p.State("plans/p.yaml", "h")
	spec := st.Steps["review"]
	if spec.InstructionTemplate != p.Steps[0].Spec.Instruction || spec.TitleTemplate != "Review ${params.target}" {
		t.Errorf("templates not kept: %+v", spec)
	}
}

func TestResolveParams(t *testing.T) {
	p := mustParse(t, paramsPlan)
	got, err := p.ResolveParams(map[string]any{"ticket": map[string]any{"id": "T-1"}, "max_rounds": 3})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"max_rounds": 3, "target": ".", "ticket": map[string]any{"id": "T-1"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("params (-want +got):\n%s", diff)
	}

	_, err = p.ResolveParams(map[string]any{"max_round": 3, "max_rounds": 11, "ticket": map[string]any{"id": 7}})
	var pe *ParamsError
	if !errors.As(err, &pe) {
		t.Fatalf("want a *ParamsError, got %v", err)
	}
	wantProblems := []string{
		`params.max_round: unknown param: did you mean "max_rounds"?`,
		"params.max_rounds: ",
		"params.ticket/id: ",
	}
	if len(pe.Problems) != len(wantProblems) {
		t.Fatalf("problems %q, want %d", pe.Problems, len(wantProblems))
	}
	for i, w := range wantProblems {
		if !strings.HasPrefix(pe.Problems[i], w) {
			t.Errorf("problem %d = %q, want it to start %q", i, pe.Problems[i], w)
		}
	}

	_, err = p.ResolveParams(nil)
	if err == nil || !strings.Contains(err.Error(), "params.ticket: required: the plan gives no default") {
		t.Errorf("a required param not given: %v", err)
	}
}

func TestParsePlan_ParamsErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"not a mapping", "params: [a]\nsteps: [{id: a, title: t, instruction: i}]\n",
			"plans/p.yaml:1:9: params: want a mapping of names to JSON Schemas"},
		{"bad name", "params:\n  2x: {type: string}\nsteps: [{id: a, title: t, instruction: i}]\n",
			"plans/p.yaml:2:3: params: \"2x\": a param's name is letters"},
		{"bad schema", "params:\n  x: {type: strng}\nsteps: [{id: a, title: t, instruction: i}]\n",
			"plans/p.yaml:2:6: result: not a valid JSON Schema"},
		{"bad default", "params:\n  x: {type: integer, default: two}\nsteps: [{id: a, title: t, instruction: i}]\n",
			"plans/p.yaml:2:6: params.x: its default does not satisfy its schema"},
		{"undeclared in a condition", "params: {max_rounds: {type: integer, default: 1}}\nsteps: [{id: a, title: t, instruction: i, when: params.max_round > 1}]\n",
			`plans/p.yaml:2:49: when: no param "max_round": did you mean "max_rounds"?`},
		{"undeclared in a template", "steps:\n  - id: a\n    title: t\n    instruction: go ${params.y}\n",
			`plans/p.yaml:4:18: instruction: no param "y": the plan's params do not declare it`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePlan(strings.NewReader(tc.src), "plans/p.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v\nwant %q", err, tc.want)
			}
		})
	}
}

func TestParsePlan_Summary(t *testing.T) {
	p := mustParse(t, paramsPlan+"summary:\n  target: params.target\n  tries: steps.review.tries\n")
	st := p.State("plans/p.yaml", "h")
	got := EvalSummary(st.Settings.Summary, &Env{Params: map[string]any{"target": "src"},
		Runs: map[string]*planspec.StepRun{"review": {Status: planspec.StatusDone, Tries: 2}}})
	if diff := cmp.Diff(map[string]any{"target": "src", "tries": 2}, got); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	for _, tc := range []struct{ src, want string }{
		{"summary: [a]\n", "plans/p.yaml:11:10: summary: want a mapping of names to expressions"},
		{"summary: {a: 'steps.nope.tries'}\n", `plans/p.yaml:11:14: a: no step "nope" in this plan`},
		{"summary: {a: 'params.nope'}\n", `plans/p.yaml:11:14: a: no param "nope"`},
		{"summary: {a: '1 +'}\n", "plans/p.yaml:11:17: a: unexpected token EOF"},
	} {
		_, err := ParsePlan(strings.NewReader(paramsPlan+tc.src), "plans/p.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v\nwant %q", tc.src, err, tc.want)
		}
	}
}
