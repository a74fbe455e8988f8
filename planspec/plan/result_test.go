package plan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/planspec"
)

const resultPlan = `agent: mcp
steps:
  - id: fetch
    title: Fetch
    instruction: Find the page
    onInvalid: abort
    result:
      type: object
      required: [url, pages]
      properties:
        url: {type: string, pattern: "^https://"}
        pages: {type: integer, minimum: 1}
  - id: use
    title: Use
    instruction: Use it
    agent: [demo]
    when: steps.fetch.result.pages > 2
`

func TestParsePlan_Result(t *testing.T) {
	p, err := ParsePlan(strings.NewReader(resultPlan), "r.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !planspec.IsPull(p.Agent) || planspec.IsPull(p.Steps[1].Spec.Agent) {
		t.Errorf("agent = %v, %v", p.Agent, p.Steps[1].Spec.Agent)
	}
	st := p.State("plans/r.yaml", "h")
	if !st.IsPull("fetch") || st.IsPull("use") || st.OnInvalidMode("fetch") != planspec.OnInvalidAbort || st.OnInvalidMode("use") != planspec.OnInvalidRetry {
		t.Errorf("pull/onInvalid wrong")
	}
	st.Run("fetch").Result = json.RawMessage(`{"url":"https://x","pages":3}`)
	back, err := planspec.ParseState(bytes.NewReader(st.Marshal()), "state.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(back.Steps["fetch"].Result); got != string(st.Steps["fetch"].Result) {
		t.Errorf("result schema round trip: %s", got)
	}
	if back.Steps["fetch"].OnInvalid != planspec.OnInvalidAbort || string(back.StepRuns["fetch"].Result) != `{"url":"https://x","pages":3}` {
		t.Errorf("round trip lost onInvalid or the run's result: %+v", back.StepRuns["fetch"])
	}
	if !bytes.Equal(back.Marshal(), st.Marshal()) {
		t.Errorf("second round trip differs")
	}
	c, err := CompileCondition(st.Steps["use"].When)
	if err != nil {
		t.Fatal(err)
	}
	ok, err := c.Eval(&Env{Runs: back.StepRuns})
	if err != nil || !ok {
		t.Errorf("steps.fetch.result.pages > 2 = %v, %v", ok, err)
	}

	rs, err := back.ResultSchema("fetch")
	if err != nil {
		t.Fatal(err)
	}
	if errs := rs.Validate(json.RawMessage(`{"url":"https://x","pages":3}`)); errs != nil {
		t.Errorf("valid result refused: %v", errs)
	}
	errs := rs.Validate(json.RawMessage(`{"url":"ftp://x","pages":0}`))
	if len(errs) != 2 || !strings.HasPrefix(errs[0], "/") {
		t.Fatalf("want two located errors, got %q", errs)
	}
	joined := strings.Join(errs, "\n")
	for _, want := range []string{"/url: ", "/pages: "} {
		if !strings.Contains(joined, want) {
			t.Errorf("errors %q lack %q", errs, want)
		}
	}
	if errs := rs.Validate(nil); len(errs) != 1 || !strings.Contains(errs[0], "no result") {
		t.Errorf("missing result: %q", errs)
	}
}

func TestParsePlan_ResultErrors(t *testing.T) {
	for _, tc := range []struct{ name, step, want string }{
		{"bad schema", "    result: {type: 12}\n", "r.yaml:5:13: result: not a valid JSON Schema"},
		{"not a mapping", "    result: [1]\n", "r.yaml:5:13: result: want a JSON Schema"},
		{"remote ref", "    result: {$ref: \"file:///etc/passwd\"}\n", "r.yaml:5:13: result: not a valid JSON Schema"},
		{"onInvalid", "    onInvalid: later\n", `r.yaml:5:16: onInvalid: want retry (the try stays open for a corrected report) or abort (the try fails), got "later"`},
		{"agent word", "    agent: claude-ish\n", "r.yaml:5:12: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "steps:\n  - id: a\n    title: A\n    instruction: do a\n" + tc.step
			_, err := ParsePlan(strings.NewReader(src), "r.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestParsePlan_ResultFrom(t *testing.T) {
	p, err := ParsePlan(strings.NewReader("steps:\n  - {id: a, title: A, instruction: do a, resultFrom: output}\n  - {id: b, title: B, instruction: do b, resultFrom: 'file:out/b.yaml'}\n"), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st := p.State("p.yaml", "")
	if !st.ResultFromOutput("a") || st.ResultFromFile("b") != "out/b.yaml" || st.ResultFromFile("a") != "" {
		t.Errorf("a %q, b %q", st.Steps["a"].ResultFrom, st.Steps["b"].ResultFrom)
	}
	back, err := planspec.ParseStateBytes(st.Marshal(), "state.json")
	if err != nil || back.Steps["b"].ResultFrom != "file:out/b.yaml" {
		t.Errorf("state.json keeps resultFrom: %v, %+v", err, back.Steps["b"])
	}
	bad := "agent: mcp\nsteps:\n  - {id: a, title: A, instruction: do a, resultFrom: output}\n  - {id: b, title: B, instruction: do b, resultFrom: stdout}\n  - {id: c, title: C, instruction: do c, resultFrom: 'file:../x'}\n"
	_, err = ParsePlan(strings.NewReader(bad), "p.yaml")
	for _, want := range []string{
		"p.yaml:3:5: resultFrom: output: a pulled step (agent: mcp) has no output",
		`p.yaml:4:54: resultFrom: want output (the agent's final message) or file:PATH`,
		"p.yaml:5:54: resultFrom: path \"../x\" leaves the workspace",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("errors:\n%v\nwant %q", err, want)
		}
	}
}
