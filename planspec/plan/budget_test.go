package plan

import (
	"strings"
	"testing"
	"time"

	"github.com/stepseq/stepseq/planspec"
)

func TestParsePlan_Budget(t *testing.T) {
	src := `budget: {usd: 5, tokens: 2000000, tries: 30, wall: 4h}
steps:
  - id: a
    title: A
    instruction: do a
    budget: {usd: 1.5}
`
	p, err := ParsePlan(strings.NewReader(src), "b.plan.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := planspec.Budget{USD: 5, Tokens: 2000000, Tries: 30, Wall: planspec.Duration(4 * time.Hour)}
	if p.Budget != want || p.Steps[0].Spec.Budget != (planspec.Budget{USD: 1.5}) {
		t.Fatalf("budgets = %+v, %+v", p.Budget, p.Steps[0].Spec.Budget)
	}
	for _, tc := range []struct{ budget, err string }{
		{"{usd: 0}", "b.plan.yaml:1:15: usd: want a bound above 0"},
		{"{dollars: 5}", `unknown key "dollars"`},
		{"{wall: 4}", "want a number with a unit"},
		{"5", "budget: want a mapping of bounds"},
	} {
		_, err := ParsePlan(strings.NewReader("budget: "+tc.budget+"\n"+src[strings.Index(src, "steps"):]), "b.plan.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("budget %s: err = %v, want %q", tc.budget, err, tc.err)
		}
	}
}

func TestParsePlan_Prices(t *testing.T) {
	src := "prices: {codex: {input: 1.25, output: 10, cache: 0.125}}\nsteps:\n  - {id: a, title: A, instruction: do a}\n"
	p, err := ParsePlan(strings.NewReader(src), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p.Prices["codex"] != (planspec.Price{Input: 1.25, Output: 10, Cache: 0.125}) {
		t.Fatalf("prices %+v", p.Prices)
	}
	if _, err := ParsePlan(strings.NewReader(strings.Replace(src, "input: 1.25", "input: cheap", 1)), "p.yaml"); err == nil ||
		!strings.Contains(err.Error(), "p.yaml:1:9: prices: want a model or preset") {
		t.Errorf("a price that is not a number: %v", err)
	}
}
