package plan

import (
	"strings"
	"testing"

	"github.com/stepseq/stepseq/planspec"
)

func TestTemplate_Render(t *testing.T) {
	env := &Env{
		Params: map[string]any{"target": "src/", "n": float64(3), "tags": []any{"a", "b"}},
		Vars:   map[string]any{"topic": "solar"},
		Runs:   map[string]*planspec.StepRun{"review": {Status: planspec.StatusDone, Result: []byte(`{"doc_path":"r.md","findings":{"high":2}}`)}},
	}
	for _, tc := range []struct{ src, want string }{
		{"plain text", "plain text"},
		{"Review ${params.target} on ${vars.topic}", "Review src/ on solar"},
		{"[${params.n + 1}/${params.n}]", "[4/3]"},
		{"tags ${params.tags}", `tags ["a","b"]`},
		{"in ${steps.review.result.doc_path}: ${steps.review.result.findings}", `in r.md: {"high":2}`},
		{"literal $${params.target} and ${params.target}", "literal ${params.target} and src/"},
		{"braces ${ {'a': '}'}.a } ok", "braces } ok"},
		{"${steps.review.status == 'DONE'}", "true"},
	} {
		tpl, err := CompileTemplate(tc.src)
		if err != nil {
			t.Errorf("CompileTemplate(%q): %v", tc.src, err)
			continue
		}
		got, err := tpl.Render(env)
		if err != nil || got != tc.want {
			t.Errorf("Render(%q) = %q, %v; want %q", tc.src, got, err, tc.want)
		}
	}
}

func TestTemplate_RenderFails(t *testing.T) {
	env := &Env{Runs: map[string]*planspec.StepRun{"review": {Status: planspec.StatusPending}}}
	for _, tc := range []struct{ src, want string }{
		{"in ${steps.review.result.doc_path}", "template ${steps.review.result.doc_path}: cannot fetch doc_path from <nil>"},
		{"from ${steps.review.result}", "template ${steps.review.result}: gave nil"},
		{"n ${int('x')}", "template ${int('x')}: "},
	} {
		tpl, err := CompileTemplate(tc.src)
		if err != nil {
			t.Fatalf("CompileTemplate(%q): %v", tc.src, err)
		}
		if got, err := tpl.Render(env); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Render(%q) = %q, %v; want an error with %q", tc.src, got, err, tc.want)
		}
	}
}

func TestTemplate_CompileErrors(t *testing.T) {
	for _, tc := range []struct {
		src       string
		line, col int
		msg       string
	}{
		{"a ${params.x", 1, 3, "${ is not closed"},
		{"a ${}", 1, 3, "empty ${}"},
		{"ok\nthen ${1 +}", 2, 10, ""},
		{"x ${nosuch}", 1, 5, `unknown name "nosuch"`},
		{`x ${env("TOKEN")}`, 1, 5, "env is not allowed in a ${…} template"},
		{"x\n${len($env.env(\"TOKEN\"))}", 2, 7, "$env is not allowed"},
	} {
		_, err := CompileTemplate(tc.src)
		ce, ok := err.(*ConditionError)
		if !ok {
			t.Errorf("CompileTemplate(%q) = %v, want a *ConditionError", tc.src, err)
			continue
		}
		if ce.Line != tc.line || ce.Column != tc.col || !strings.Contains(ce.Msg, tc.msg) {
			t.Errorf("CompileTemplate(%q) at %d:%d %q; want %d:%d %q", tc.src, ce.Line, ce.Column, ce.Msg, tc.line, tc.col, tc.msg)
		}
	}
}

func TestParsePlan_TemplateErrorsLocated(t *testing.T) {
	src := "steps:\n  - id: a\n    title: T ${nosuch}\n    instruction: |\n      line one\n      then ${1 +}\n"
	_, err := ParsePlan(strings.NewReader(src), "plans/p.yaml")
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{
		`plans/p.yaml:3:16: title: unknown name "nosuch"`,
		"plans/p.yaml:4:18: instruction: ",
		"(at 2:10 in the template)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors %q\nwant %q", err, want)
		}
	}
}

// What env() gives would be kept in state.json as rendered: validate refuses it
// in every template and summary, located, with the fix. A condition may still
// read it (its value stays out of the state and of its errors).
func TestParsePlan_TemplateMayNotReadEnv(t *testing.T) {
	src := `agent: [tool, "--key=${env('KEY')}"]
summary: {key: env("KEY")}
steps:
  - id: a
    title: T ${env("KEY")}
    instruction: use ${env("KEY")}
    when: env("KEY") != ""
`
	_, err := ParsePlan(strings.NewReader(src), "plans/p.yaml")
	if err == nil {
		t.Fatal("want errors")
	}
	const fix = "env is not allowed in a ${…} template, a summary or a max: what it gives is kept in state.json in plain text; " +
		"pass the value as a param (params.NAME), or let the agent read its environment"
	for _, want := range []string{
		"plans/p.yaml:1:24: agent: " + fix,
		"plans/p.yaml:2:16: key: " + fix,
		"plans/p.yaml:5:16: title: " + fix,
		"plans/p.yaml:6:24: instruction: " + fix,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors:\n%v\nwant %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "when:") {
		t.Errorf("a condition reading env() was refused: %v", err)
	}
}

func BenchmarkRenderTemplate(b *testing.B) {
	tpl, err := CompileTemplate("[Round ${params.n}/${params.max}] Review ${params.target}; fix ${steps.review.result.doc_path}.")
	if err != nil {
		b.Fatal(err)
	}
	env := &Env{
		Params: map[string]any{"n": float64(2), "max": float64(5), "target": "src/"},
		Runs:   map[string]*planspec.StepRun{"review": {Status: planspec.StatusDone, Result: []byte(`{"doc_path":"r.md","findings_total":3}`)}},
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tpl.Render(env); err != nil {
			b.Fatal(err)
		}
	}
}
