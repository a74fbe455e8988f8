package plan

import (
	"slices"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/planspec"
)

func TestParsePlan_AgentTemplates(t *testing.T) {
	src := `params:
  model: {type: string, default: m1}
agent: [claude-wrapper, "--model=${params.model}"]
steps:
  - id: a
    title: A
    instruction: do a
    agent: {preset: codex, args: [-m, "${params.model}"]}
  - id: b
    title: B
    instruction: do b
`
	p, err := ParsePlan(strings.NewReader(src), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st := p.State("p.yaml", "")
	if got := st.Steps["a"].AgentTemplate; got.Preset != "codex" || !slices.Equal(got.Args, []string{"-m", "${params.model}"}) {
		t.Errorf("a's agentTemplate = %+v", got)
	}
	if !st.Steps["b"].AgentTemplate.IsZero() || !st.Settings.Agent.HasTemplate() {
		t.Errorf("b's agentTemplate = %+v, plan agent %+v: the plan's agent is rendered when a step runs it", st.Steps["b"].AgentTemplate, st.Settings.Agent)
	}
	env := &Env{Params: map[string]any{"model": "gpt 5"}}
	a, err := RenderSpec(st.Steps["a"], st.Settings.Agent, env)
	if err != nil || !slices.Equal(a.Agent.Args, []string{"-m", "gpt 5"}) || a.AgentTemplate.Args[1] != "${params.model}" {
		t.Errorf("a rendered: %+v, %v", a, err)
	}
	b, err := RenderSpec(st.Steps["b"], st.Settings.Agent, env)
	if err != nil || !slices.Equal(b.Agent.Argv, []string{"claude-wrapper", "--model=gpt 5"}) || !b.AgentTemplate.Equal(st.Settings.Agent) {
		t.Errorf("b rendered: %+v, %v", b, err)
	}

	bad := `params: {model: {type: string, default: m1}}
agent: ["${params.model}", -p]
steps:
  - id: a
    title: A
    instruction: do a
    agent: [tool, "${params.modle}", "${1 +}"]
  - id: b
    title: B
    instruction: do b
    agent: [env, "${params.model}"]
`
	_, err = ParsePlan(strings.NewReader(bad), "p.yaml")
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{
		`p.yaml:2:8: agent: "${params.model}": a ${…} template may not stand for the program`,
		`p.yaml:7:19: agent: no param "modle": did you mean "model"?`,
		`p.yaml:7:43: agent: unexpected token EOF`,
		`p.yaml:11:12: agent: "${params.model}": a ${…} template may not stand for the program`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors:\n%v\nwant %q", err, want)
		}
	}
}

// A rendered value is one argument; one that would add an option, a
// placeholder, a NUL or code for an interpreter fails the rendering.
func TestRenderAgent(t *testing.T) {
	argv := func(words ...string) planspec.AgentSpec { return planspec.AgentSpec{Argv: words} }
	for _, tc := range []struct {
		name  string
		agent planspec.AgentSpec
		value string
		want  []string
		err   string
	}{
		{"spaces and quotes stay one word", argv("tool", "${params.v}"), `a b "c"; rm -rf /`, []string{"tool", `a b "c"; rm -rf /`}, ""},
		{"an option's value after a literal", argv("tool", "--model=${params.v}"), "-x", []string{"tool", "--model=-x"}, ""},
		{"an option added", argv("tool", "${params.v}"), "--dangerous", nil, "a template may not add an option"},
		{"a shell flag", argv("python3", "${params.v}"), "-c", nil, "a template may not add an option"},
		{"a placeholder", argv("tool", "${params.v}"), "{changed}", nil, "may not give a placeholder"},
		{"a NUL", argv("tool", "x${params.v}"), "a\x00b", nil, "NUL"},
		{"a preset's args", planspec.AgentSpec{Preset: "codex", Args: []string{"-m", "${params.v}"}}, "o3", []string{"-m", "o3"}, ""},
		{"code for awk", argv("awk", "x${params.v}"), "BEGIN{}", nil, "runs its first argument as a program"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RenderAgent(tc.agent, &Env{Params: map[string]any{"v": tc.value}})
			words := got.Argv
			if got.Preset != "" {
				words = got.Args
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("= %q, %v; want an error with %q", words, err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(words, tc.want) {
				t.Errorf("= %q, %v; want %q", words, err, tc.want)
			}
		})
	}
}
