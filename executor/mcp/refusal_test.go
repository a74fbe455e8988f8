package mcp

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/listener"
)

// toolSchemas are the listed tools' schemas, resolved, by tool name.
func toolSchemas(t *testing.T, cs *sdk.ClientSession) map[string][2]*jsonschema.Resolved {
	t.Helper()
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][2]*jsonschema.Resolved{}
	for _, tool := range list.Tools {
		var pair [2]*jsonschema.Resolved
		for i, sch := range []any{tool.InputSchema, tool.OutputSchema} {
			data, _ := json.Marshal(sch)
			var s jsonschema.Schema
			if err := json.Unmarshal(data, &s); err != nil {
				t.Fatalf("%s: schema %s: %v", tool.Name, data, err)
			}
			if pair[i], err = s.Resolve(nil); err != nil {
				t.Fatalf("%s: schema %s: %v", tool.Name, data, err)
			}
		}
		out[tool.Name] = pair
	}
	return out
}

// conforms checks an answer's structured content against the tool's output
// schema, as a client does (the TypeScript SDK checks an error's too).
func conforms(t *testing.T, schemas map[string][2]*jsonschema.Resolved, tool string, res *sdk.CallToolResult) {
	t.Helper()
	data, _ := json.Marshal(res.StructuredContent)
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: structured content %s: %v", tool, data, err)
	}
	if err := schemas[tool][1].Validate(v); err != nil {
		t.Errorf("%s: the answer %.300s does not satisfy the tool's output schema: %v", tool, data, err)
	}
}

// TestTools_RefusalCodes walks every tool with calls it refuses: each is
// isError, with its code from the fixed list and its reasons in words, as text
// and as structured content that satisfies the tool's output schema. A tool
// without a case fails the test.
func TestTools_RefusalCodes(t *testing.T) {
	w := newWorkspace(t)
	allow, err := engine.ParseAllowList([]string{"mcp"}, w.rt.WS.Dir)
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc), Allow: allow})
	cs := connect(t, srv, "worker")
	schemas := toolSchemas(t, cs)
	if out, errText := call(t, cs, "plan_submit", map[string]any{"name": "pull", "yaml": pullPlan}); out["status"] != core.PlanActive {
		t.Fatalf("plan_submit: %v %s", out, errText)
	}
	cur := waitTool(t, cs, "step_current", map[string]any{}, func(o map[string]any) bool { return o["step"] != nil })
	token := cur["step"].(map[string]any)["token"].(string)
	r := report(token, "milestone", nil)
	r["summary"] = " "
	program := "agent: [python3, agent.py]\nsteps:\n  - id: a\n    title: A\n    instruction: do a\n"

	cases := []struct {
		tool string
		args any
		code Code
		want string // in the reasons
	}{
		{"plan_validate", map[string]any{"yaml": nil}, InvalidParams, "arguments.yaml: null; want a string"},
		{"plan_list", map[string]any{"filter": "x"}, InvalidParams, "arguments.filter: unknown; this tool takes no argument"},
		{"plan_submit", map[string]any{"name": ".hidden", "yaml": pullPlan}, InvalidParams, "hidden file"},
		{"plan_submit", map[string]any{"name": "bad", "yaml": "steps:\n  - id: a\n"}, InvalidPlan, "missing title"},
		{"plan_submit", map[string]any{"name": "program", "yaml": program}, NotAllowed, "is not allowed"},
		{"status", map[string]any{"step": "fetch"}, InvalidParams, "arguments.step: unknown; it takes run"},
		{"status", map[string]any{"run": "nope"}, NotFound, "no such run: nope (no state.nope.json; run_list lists the runs)"},
		{"status", map[string]any{"run": "../x"}, InvalidParams, `invalid run name "../x"`},
		{"logs", map[string]any{"step": "nope"}, NotFound, `no step "nope" in the plan (steps: fetch, use)`},
		{"logs", map[string]any{"step": "fetch", "try": 9}, NotFound, "step fetch has had 1 tries: no try 9"},
		{"logs", map[string]any{"step": "fetch", "try": 1.5}, InvalidParams, "arguments.try: the number 1.5; want an integer"},
		{"notifications", map[string]any{"since": "yesterday"}, InvalidParams, "arguments.since: "},
		{"step_current", map[string]any{"run": 1}, InvalidParams, "arguments.run: the number 1; want a string"},
		{"step_current", map[string]any{"run": "nope"}, NotFound, "no such run"},
		{"step_report", report("forged.1.abc", "done", nil), Stale, "call step_current"},
		{"step_report", r, InvalidParams, "missing summary"},
		{"step_report", report(token, "milestone", nil), NotAllowed, "milestone before accepted"},
		{"step_report", map[string]any{"token": "other:" + token, "run": "main", "status": "done", "summary": "s", "evidence": "e", "risk": "none", "next": "none"},
			InvalidParams, "arguments.run: main, but the token is a try of run other"},
		{"step_report", report("gone:"+token, "done", nil), NotFound, "no such run: gone"},
		{"run_start", map[string]any{"plan": "nope"}, NotFound, `no plan "nope" in plans/ (plans/ holds pull)`},
		{"run_start", map[string]any{"plan": "steps:\n  - id: a\n"}, InvalidPlan, "2:5: missing title"},
		{"run_start", map[string]any{"plan": program}, NotAllowed, "is not allowed"},
		{"run_start", map[string]any{"plan": "pull", "params": map[string]any{"x": 1}}, InvalidParams, "params.x: unknown param: the plan declares no params"},
		{"run_start", map[string]any{"plan": "pull", "run": "a/b"}, InvalidParams, `invalid run name "a/b"`},
		{"run_list", map[string]any{"filter": 1}, InvalidParams, "arguments.filter: the number 1; want a string"},
		{"run_close", map[string]any{"run": "nope"}, NotFound, "no such run: nope"},
		{"run_resume", map[string]any{"run": "nope"}, NotFound, "no such run: nope"},
		{"retry", map[string]any{"step": "nope"}, NotFound, `no step "nope"`},
		{"trigger", map[string]any{}, InvalidParams, "arguments.step: missing (the step id)"},
		{"trigger", map[string]any{"step": "nope"}, NotFound, `no step "nope"`},
		{"approve", map[string]any{"step": "fetch"}, NotAllowed, "a worker's session may not answer a gate"},
		{"reject", map[string]any{"note": 1}, InvalidParams, "arguments.note: the number 1; want a string"},
		{"budget", map[string]any{"changes": []string{"usd=+2"}}, NotAllowed, "a worker's session may not change a run's budget"},
		{"run_start", map[string]any{"plan": "pull", "budget": map[string]any{"wall": "soon"}}, InvalidParams, "arguments.budget: budget wall"},
	}
	tried := map[string]bool{}
	for _, tc := range cases {
		tried[tc.tool] = true
		res, out := callRaw(t, cs, tc.tool, tc.args)
		reasons := toStrings(out["reasons"])
		text := ""
		if len(res.Content) > 0 {
			text = res.Content[0].(*sdk.TextContent).Text
		}
		if !res.IsError || out["code"] != string(tc.code) || !strings.Contains(strings.Join(reasons, "\n"), tc.want) ||
			!strings.HasPrefix(text, string(tc.code)+": ") {
			t.Errorf("%s %v: isError %v, %v, text %q; want code %s with a reason containing %q", tc.tool, tc.args, res.IsError, out, text, tc.code, tc.want)
		}
		conforms(t, schemas, tc.tool, res)
	}
	for name := range schemas {
		if !tried[name] {
			t.Errorf("tool %s has no refused call in this test", name)
		}
	}
}

// TestTools_AnswersConform: what the tools answer satisfies their output
// schemas, and questions with an empty answer are answers, not errors.
func TestTools_AnswersConform(t *testing.T) {
	w := newWorkspace(t)
	cs := connect(t, NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)}), "worker")
	schemas := toolSchemas(t, cs)
	check := func(tool string, args any) map[string]any {
		t.Helper()
		res, out := callRaw(t, cs, tool, args)
		if res.IsError {
			t.Errorf("%s %v: an error: %v", tool, args, out)
		}
		conforms(t, schemas, tool, res)
		return out
	}
	check("status", nil) // no plan yet
	check("step_current", map[string]any{})
	check("notifications", map[string]any{})
	check("plan_validate", map[string]any{"yaml": "steps: [}"})
	check("plan_list", map[string]any{})
	check("plan_submit", map[string]any{"name": "pull", "yaml": pullPlan})
	waitTool(t, cs, "step_current", map[string]any{}, func(o map[string]any) bool { return o["step"] != nil })
	check("step_current", map[string]any{})
	check("status", map[string]any{})
	if out := check("logs", map[string]any{"step": "use"}); out["try"] != 0.0 || len(toStrings(out["lines"])) != 0 {
		t.Errorf("logs of a step not run yet: %v, want try 0 and no line", out)
	}
	check("logs", map[string]any{"step": "fetch"})
	check("plan_list", map[string]any{})
	check("run_start", map[string]any{"plan": pullPlan, "run": "side"})
	check("run_list", map[string]any{})
	check("status", map[string]any{"run": "side"})
	check("step_current", map[string]any{"run": "side"})
	check("notifications", map[string]any{"run": "side"})
	check("trigger", map[string]any{"run": "side", "step": "fetch"})
}

// TestTools_SchemasPortable holds every tool's schemas to the rules the MCP
// Inspector's --strict applies: no bare true or false where a schema is
// expected (additionalProperties may be one), no type arrays, no schema that
// constrains nothing; every input object takes no field it does not name.
func TestTools_SchemasPortable(t *testing.T) {
	w := newWorkspace(t)
	cs := connect(t, NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)}), "lint")
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range list.Tools {
		for kind, sch := range map[string]any{"inputSchema": tool.InputSchema, "outputSchema": tool.OutputSchema} {
			data, _ := json.Marshal(sch)
			var v any
			if err := json.Unmarshal(data, &v); err != nil {
				t.Fatal(err)
			}
			for _, f := range lintSchema(v, kind, "") {
				t.Errorf("tool %s: %s", tool.Name, f)
			}
			if kind == "inputSchema" {
				if m, _ := v.(map[string]any); m["additionalProperties"] != false {
					t.Errorf("tool %s: input schema %s takes fields it does not name", tool.Name, data)
				}
			}
		}
	}
}

// lintSchema is what the Inspector's --strict finds in a schema, at path.
func lintSchema(v any, path, keyword string) []string {
	var out []string
	switch x := v.(type) {
	case bool:
		if !slices.Contains([]string{"additionalProperties", "unevaluatedProperties", "additionalItems", "unevaluatedItems"}, keyword) {
			out = append(out, path+": a bare boolean where a schema is expected")
		}
		return out
	case map[string]any:
		if _, ok := x["type"].([]any); ok {
			out = append(out, path+": type is an array (use anyOf)")
		}
		constrains := false
		for k := range x {
			if !slices.Contains(annotations, k) {
				constrains = true
			}
		}
		if !constrains && keyword != "not" {
			out = append(out, path+": constrains nothing")
		}
		for _, k := range []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"} {
			if m, ok := x[k].(map[string]any); ok {
				for name, sub := range m {
					out = append(out, lintSchema(sub, path+"."+k+"."+name, k)...)
				}
			}
		}
		for _, k := range []string{"allOf", "anyOf", "oneOf", "prefixItems"} {
			if l, ok := x[k].([]any); ok {
				for i, sub := range l {
					out = append(out, lintSchema(sub, path+"."+k+"["+string(rune('0'+i))+"]", k)...)
				}
			}
		}
		for _, k := range []string{"items", "contains", "not", "propertyNames", "if", "then", "else", "additionalProperties", "unevaluatedProperties", "additionalItems", "unevaluatedItems", "contentSchema"} {
			if sub, ok := x[k]; ok {
				out = append(out, lintSchema(sub, path+"."+k, k)...)
			}
		}
	}
	return out
}

// TestTools_NullArguments: a null argument, anywhere, is refused with its
// place named and what it should be, never "<invalid reflect.Value>".
func TestTools_NullArguments(t *testing.T) {
	w := newWorkspace(t)
	cs := connect(t, NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)}), "nulls")
	for _, tc := range []struct {
		tool string
		args map[string]any
		want []string
	}{
		{"logs", map[string]any{"step": nil, "try": nil}, []string{
			"arguments.step: null; want a string (leave it out rather than send null)", "arguments.try: null; want an integer"}},
		{"step_report", map[string]any{"token": "t", "status": "done", "summary": "s", "evidence": "e", "risk": "none", "next": "none",
			"artifacts": []any{"a", nil}, "result": nil}, []string{"arguments.artifacts[1]: null; want a string", "arguments.result: null; want an object or an array"}},
		{"plan_submit", map[string]any{"name": nil, "yaml": nil}, []string{"arguments.name: null", "arguments.yaml: null"}},
	} {
		res, out := callRaw(t, cs, tc.tool, tc.args)
		got := strings.Join(toStrings(out["reasons"]), "\n")
		if !res.IsError || out["code"] != string(InvalidParams) || strings.Contains(got, "reflect") {
			t.Errorf("%s %v: isError %v, %v", tc.tool, tc.args, res.IsError, out)
		}
		for _, want := range tc.want {
			if !strings.Contains(got, want) {
				t.Errorf("%s: reasons %q, want %q", tc.tool, got, want)
			}
		}
	}
	// No arguments at all is none given: a tool that needs none answers.
	if res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "status", Arguments: json.RawMessage("null")}); err != nil || res.IsError {
		t.Errorf("status with null arguments: %v %v", res, err)
	}
}

// TestTools_EveryArgumentProblem: a call wrong in several ways is told each,
// located: a missing field with what it is, an unknown one with what the tool
// takes, a value of the wrong type with the type wanted.
func TestTools_EveryArgumentProblem(t *testing.T) {
	w := newWorkspace(t)
	cs := connect(t, NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)}), "typos")
	res, out := callRaw(t, cs, "logs", map[string]any{"stp": "fetch", "try": "1", "tail": 5})
	want := []string{"arguments.stp: unknown; it takes run, step, tail, try", "arguments.step: missing (the step id)",
		`arguments.try: the string "1"; want an integer`}
	if got := toStrings(out["reasons"]); !res.IsError || out["code"] != string(InvalidParams) || !slices.Equal(got, want) {
		t.Errorf("logs with three problems: isError %v, %v; want reasons %q", res.IsError, out, want)
	}
}

// TestTools_BusyWithoutASidecar: beside a workspace whose sidecar gives no
// verdict, plan_submit says busy (the same call may succeed later).
func TestTools_BusyWithoutASidecar(t *testing.T) {
	dir := t.TempDir()
	rt, eng := filesRuntime(t, filepath.Join(dir, "state.json"))
	cs := connect(t, NewServer(Options{Runtime: rt, Engine: eng, PlanWait: 100 * time.Millisecond}), "worker")
	res, out := callRaw(t, cs, "plan_submit", map[string]any{"name": "pull", "yaml": pullPlan})
	if !res.IsError || out["code"] != string(Busy) || !strings.Contains(strings.Join(toStrings(out["reasons"]), ""), "no verdict within") {
		t.Errorf("plan_submit without a sidecar: isError %v, %v; want busy", res.IsError, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "plans", "pull.yaml")); err != nil {
		t.Errorf("the plan is not queued for a sidecar to come: %v", err)
	}
}

// The listener's 401 for /mcp carries the list's unauthorized code.
func TestCodes_UnauthorizedIsTheListeners(t *testing.T) {
	if listener.UnauthorizedCode != string(Unauthorized) || !slices.Contains(Codes, Unauthorized) || len(Codes) != 9 {
		t.Errorf("listener's %q, the list %v", listener.UnauthorizedCode, Codes)
	}
}
