package plan

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/planspec"
)

const typedParams = `params:
  count: {type: integer, default: 2}
  target: {type: string, default: src}
  tags: {type: array, items: {type: string}, default: []}
  ticket:
    type: object
    properties: {id: {type: string}, n: {type: integer}}
    additionalProperties: false
    default: {id: T-1, n: 1}
  any: {default: 1}
`

// Expressions read params typed from their schemas: what the types allow
// compiles, what they refuse is a located validate error, in conditions,
// templates (instruction, title, agent arguments) and summaries alike.
func TestParsePlan_ParamsTyped(t *testing.T) {
	good := typedParams + `summary:
  next: params.count + 1
steps:
  - id: a
    title: A ${params.target + "/x"}
    instruction: "fix ${params.ticket.id} ${params.count % 2} ${join(params.tags, ',')} ${params.any + 'x'}"
    when: params.count > 1 && len(params.tags) >= 0 && params.ticket.n == 1
`
	if _, err := ParsePlan(strings.NewReader(good), "p.yaml"); err != nil {
		t.Fatalf("a well-typed plan: %v", err)
	}
	for _, tc := range []struct{ name, src, want string }{
		{"int plus string in a condition", `    when: params.count + "x" == "2x"`, `p.yaml:15:24: when: invalid operation: + (mismatched types int and string)`},
		{"a string compared to a number", `    check: params.target > 3`, `p.yaml:15:26: check: invalid operation: > (mismatched types string and int)`},
		{"a closed object's unknown key", `    when: params.ticket.nosuch == "x"`, `p.yaml:15:25: when: unknown field nosuch`},
		{"in a template", `    title: 'T ${params.count + "x"}'`, `p.yaml:15:30: title: invalid operation: + (mismatched types int and string)`},
		{"in an agent argument", `    agent: [tool, '${params.tags + 1}']`, `p.yaml:15:34: agent: invalid operation: + (mismatched types []interface {} and int)`},
		{"a boolean condition from a string", `    when: params.target`, `p.yaml:15:11: when: gives string, want true or false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			title := "    title: A\n"
			if strings.Contains(tc.src, "title:") {
				title = "    when: 'true'\n"
			}
			src := typedParams + "steps:\n  - id: a\n" + title + "    instruction: do a\n" + tc.src + "\n"
			_, err := ParsePlan(strings.NewReader(src), "p.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("errors:\n%v\nwant %q", err, tc.want)
			}
		})
	}
	loop := typedParams + `steps:
  - id: rounds
    title: R
    repeat: {max: params.count}
    steps:
      - {id: a, title: A, instruction: "round ${round}/${params.count}", exit: result.n == params.count && round < params.count}
`
	if _, err := ParsePlan(strings.NewReader(loop), "p.yaml"); err != nil {
		t.Errorf("a loop reading result, round and params: %v", err)
	}
	bad := typedParams + "summary:\n  next: params.count + \"x\"\nsteps:\n  - {id: a, title: A, instruction: do a}\n"
	if _, err := ParsePlan(strings.NewReader(bad), "p.yaml"); err == nil || !strings.Contains(err.Error(), "p.yaml:12:22: next: invalid operation: +") {
		t.Errorf("summary: %v", err)
	}
}

// An integer param is an int when an expression reads it, from the params a
// run is given and from state.json alike, so that % works on it.
func TestParams_IntegersAreInts(t *testing.T) {
	p, err := ParsePlan(strings.NewReader(typedParams+"steps:\n  - {id: a, title: A, instruction: do a, when: params.count % 2 == 1}\n"), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	params, err := p.ResolveParams(map[string]any{"count": 3})
	if err != nil {
		t.Fatal(err)
	}
	st := p.State("p.yaml", "")
	st.Settings.Params = params
	back, err := planspec.ParseStateBytes(st.Marshal(), "state.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, ps := range []map[string]any{params, back.Settings.Params} {
		c, err := CompileCondition(back.Steps["a"].When)
		if err != nil {
			t.Fatal(err)
		}
		ok, err := c.Eval(&Env{Params: ps})
		if err != nil || !ok || fmt.Sprintf("%T", ps["count"]) != "int" {
			t.Errorf("params %v (%T): %v, %v", ps, ps["count"], ok, err)
		}
	}
}

// BenchmarkParsePlan_ParamsTyped is the cost of validating a 100-step plan
// whose conditions and instructions name its params: the typed check is the
// difference from the same plan with vars instead.
func BenchmarkParsePlan_ParamsTyped(b *testing.B) {
	var withParams, withVars strings.Builder
	withParams.WriteString(typedParams + "steps:\n")
	withVars.WriteString("vars: {count: 2, target: src}\nsteps:\n")
	for i := range 100 {
		fmt.Fprintf(&withParams, "  - {id: s%d, title: S, instruction: 'fix ${params.target} %d', when: 'params.count > %d'}\n", i, i, i)
		fmt.Fprintf(&withVars, "  - {id: s%d, title: S, instruction: 'fix ${vars.target} %d', when: 'vars.count > %d'}\n", i, i, i)
	}
	for _, bc := range []struct{ name, src string }{{"params", withParams.String()}, {"vars", withVars.String()}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParsePlan(strings.NewReader(bc.src), "p.yaml"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// exit and abort are type-checked against the step's result schema, as
// expressions are against params: result.findings_total + 1 as an exit is a
// located error, and a well-typed one passes.
func TestParsePlan_ExitTypedByResult(t *testing.T) {
	step := func(exit string) string {
		return "name: t\nsteps:\n  - id: review\n    title: Review\n    instruction: review\n" +
			"    result:\n      type: object\n      required: [findings_total]\n      properties:\n        findings_total: {type: integer}\n        doc: {type: string}\n" +
			"    " + exit + "\n"
	}
	for _, tc := range []struct{ name, exit, want string }{
		{"an int as an exit", "exit: result.findings_total + 1", "p.yaml:12:11: exit: gives int, want true or false"},
		{"an int compared to a string", `abort: result.findings_total == "x"`, "p.yaml:12:34: abort: invalid operation: == (mismatched types int and string)"},
		{"a string field added to an int", "exit: result.doc + 1 > 2", "p.yaml:12:22: exit: invalid operation: + (mismatched types string and int)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePlan(strings.NewReader(step(tc.exit)), "p.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("errors:\n%v\nwant %q", err, tc.want)
			}
		})
	}
	if _, err := ParsePlan(strings.NewReader(step("exit: result.findings_total == 0 && result.doc != ''")), "p.yaml"); err != nil {
		t.Errorf("a well-typed exit: %v", err)
	}
}
