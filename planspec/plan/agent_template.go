package plan

import (
	"fmt"
	"strings"

	"github.com/stepseq/stepseq/planspec"
	"gopkg.in/yaml.v3"
)

// Templates in an agent's arguments: `agent: [claude, -p,
// --model, "${params.model}"]` or `{preset: codex, args: [-m, "${params.model}"]}`.
// An argument is rendered when a try starts, as the instruction is, and the
// rules that keep the prompt data, never code (the shell rule), hold for
// what a template gives as for what the plan wrote:
//   - a rendered value is one argument, whatever spaces or quotes it holds:
//     nothing is split again, and no shell ever sees it;
//   - the program is written in the plan: a template may not stand for it, nor
//     for the program a wrapper such as env or timeout runs (CheckAgentArgv);
//   - a template may not add an option: an argument whose template starts with
//     ${…} may not render to a word starting with "-" (write the option in the
//     plan: [--model, "${params.model}"], or "--model=${params.model}");
//   - nor a placeholder ({prompt}, {changed}) or a NUL byte;
//   - the rendered argv passes the shell rule again before it launches.
// A value that breaks one of these fails the try with the reason, before
// anything is launched, as a template that fails to evaluate does.

// agentTemplates compiles the templates of an agent's arguments, each a
// located error at its node when it does not compile; the names they read
// are checked with the conditions'.
func (d *planDecoder) agentTemplates(n *yaml.Node, field string) {
	if n.Kind != yaml.SequenceNode {
		return
	}
	for i, w := range n.Content {
		if w.Kind == yaml.ScalarNode && planspec.HasTemplate(w.Value) {
			d.template(w, fmt.Sprintf("%s[%d]", field, i), w.Value)
		}
	}
}

// RenderAgent renders the templates of an agent's arguments with env. Each
// argument renders to one argument. The error names the argument and why.
func RenderAgent(a planspec.AgentSpec, env *Env) (planspec.AgentSpec, error) {
	out := a.Clone()
	words, first := out.Args, 0
	if out.Preset == "" {
		words, first = out.Argv, 1
	}
	for i := first; i < len(words); i++ {
		src := words[i]
		if !planspec.HasTemplate(src) {
			continue
		}
		t, err := CompileTemplate(src)
		if err != nil {
			return planspec.AgentSpec{}, fmt.Errorf("argument %d %q: %w", i, planspec.Clip(src, 60), err)
		}
		v, err := t.Render(env)
		if err != nil {
			return planspec.AgentSpec{}, fmt.Errorf("argument %d: %w", i, err)
		}
		if why := renderedArgProblem(t, v); why != "" {
			return planspec.AgentSpec{}, fmt.Errorf("argument %d %q renders to %q: %s", i, planspec.Clip(src, 60), planspec.Clip(v, 60), why)
		}
		words[i] = v
	}
	if out.Preset == "" {
		if err := planspec.CheckAgentArgv(out.Argv, nil); err != nil {
			return planspec.AgentSpec{}, fmt.Errorf("rendered: %w", err)
		}
	}
	return out, nil
}

// renderedArgProblem says why a rendered argument may not be passed, or "".
func renderedArgProblem(t *Template, v string) string {
	switch {
	case strings.ContainsRune(v, 0):
		return "a NUL byte cannot be passed in an argument"
	case v == "{prompt}" || v == "{changed}":
		return "a template may not give a placeholder: write {prompt} or {changed} in the plan"
	case strings.HasPrefix(v, "-") && len(t.parts) > 0 && t.parts[0].expr != nil:
		return "a template may not add an option: write the option in the plan, like [--model, \"${params.model}\"] or \"--model=${params.model}\""
	}
	return ""
}

// AgentTemplateOf is the agent whose arguments a try of the step renders: its
// agentTemplate; else its agent, or the plan's when it has none, when that
// one holds a template (a state written by hand); zero when none does.
func AgentTemplateOf(spec *planspec.StepSpec, planAgent planspec.AgentSpec) planspec.AgentSpec {
	switch {
	case !spec.AgentTemplate.IsZero():
		return spec.AgentTemplate
	case spec.Agent.HasTemplate():
		return spec.Agent
	case spec.Agent.IsZero() && planAgent.HasTemplate():
		return planAgent
	}
	return planspec.AgentSpec{}
}

// RenderSpec renders step spec's templates as its try starts: its title, its
// instruction and its agent's arguments (its own, or else the plan's agent
// when that one has templates). It returns spec itself when nothing has a
// template, else a new spec holding the renderings, the agent's template kept
// in AgentTemplate. An error names the key.
func RenderSpec(spec *planspec.StepSpec, planAgent planspec.AgentSpec, env *Env) (*planspec.StepSpec, error) {
	if spec == nil {
		return nil, fmt.Errorf("no such step")
	}
	tpl := AgentTemplateOf(spec, planAgent)
	if spec.InstructionTemplate == "" && spec.TitleTemplate == "" && tpl.IsZero() {
		return spec, nil
	}
	title, instruction, err := RenderStep(spec, env)
	if err != nil {
		return nil, err
	}
	out := *spec
	out.Title, out.Instruction = title, instruction
	if !tpl.IsZero() {
		a, err := RenderAgent(tpl, env)
		if err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
		out.Agent, out.AgentTemplate = a, tpl.Clone()
	}
	return &out, nil
}
