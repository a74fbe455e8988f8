package planspec

import (
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// AgentPresets are the names `agent:` and `fallback:` accept for the agent CLIs
// people use, in the order the docs list them. What each one runs, and how it
// fails, is the executor's business.
var AgentPresets = []string{"claude", "codex", "gemini", "aider", "opencode", "goose", "openclaw"}

// AgentSpec is how a plan names an agent: an argv prefix, or a preset with extra
// arguments. The zero value names none (STEP_AGENT_CMD applies).
type AgentSpec struct {
	Argv   []string // argv prefix; set when Preset is empty
	Preset string   // one of AgentPresets
	Args   []string // extra arguments after the preset's own; may place {prompt} or {changed}
}

// IsZero reports whether the spec names no agent.
func (a AgentSpec) IsZero() bool { return len(a.Argv) == 0 && a.Preset == "" }

// Clone returns a copy that shares no slice with a.
func (a AgentSpec) Clone() AgentSpec {
	return AgentSpec{Argv: slices.Clone(a.Argv), Preset: a.Preset, Args: slices.Clone(a.Args)}
}

// Equal reports whether a and b name the same agent.
func (a AgentSpec) Equal(b AgentSpec) bool {
	return a.Preset == b.Preset && slices.Equal(a.Argv, b.Argv) && slices.Equal(a.Args, b.Args)
}

// MarshalJSON writes the form a plan would: the argv list, the preset's name, or
// {"preset": NAME, "args": [...]} when there are extra arguments.
func (a AgentSpec) MarshalJSON() ([]byte, error) {
	switch {
	case a.Preset == "":
		return marshal(nonNil(a.Argv))
	case len(a.Args) == 0:
		return marshal(a.Preset)
	}
	return marshal(struct {
		Preset string   `json:"preset"`
		Args   []string `json:"args"`
	}{a.Preset, a.Args})
}

// CheckPreset returns nil for a known preset name, else an error that lists the
// presets and suggests the closest one.
func CheckPreset(name string) error {
	if slices.Contains(AgentPresets, name) || name == AgentMCP {
		return nil
	}
	if s := suggest(name, AgentPresets); s != "" {
		return fmt.Errorf("unknown agent preset %q: did you mean %s?", clip(name, 40), s)
	}
	msg := fmt.Sprintf("unknown agent preset %q: want one of %s", clip(name, 40), strings.Join(AgentPresets, " "))
	if strings.ContainsAny(strings.TrimSpace(name), " \t") {
		msg += fmt.Sprintf(", or the command as a list, like [%s]", clip(strings.Join(strings.Fields(name), ", "), 60))
	}
	return fmt.Errorf("%s", msg)
}

// agent reads `agent:`: an argv list, a preset name, or {preset: NAME, args: [...]}.
func (d *planDecoder) agent(n *yaml.Node, field string) AgentSpec {
	switch {
	case n.Kind == yaml.AliasNode:
		d.alias(n, field)
	case n.Kind == yaml.SequenceNode:
		argv := d.words(n, field)
		d.agentTemplates(n, field)
		if err := CheckAgentArgv(argv, nil); err != nil {
			d.fail(n, field, "%s: %v", lastKey(field), err)
			d.errs[len(d.errs)-1].Err = err
		}
		return AgentSpec{Argv: argv}
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str":
		if err := CheckPreset(n.Value); err != nil {
			d.fail(n, field, "%s: %v", lastKey(field), err)
		}
		return AgentSpec{Preset: n.Value}
	case n.Kind == yaml.MappingNode:
		return d.agentMapping(n, field)
	default:
		d.fail(n, field, "%s: want a preset name (%s), {preset: NAME, args: [...]} or the command as a list, like [openclaw, agent, --message], got %s%s",
			lastKey(field), strings.Join(AgentPresets, ", "), describeNode(n), scalarHint(n))
	}
	return AgentSpec{}
}

func (d *planDecoder) agentMapping(n *yaml.Node, field string) AgentSpec {
	var a AgentSpec
	hasPreset := false
	d.pairs(n, field, func(key string, k, v *yaml.Node) {
		f := field + "." + key
		switch key {
		case "preset":
			hasPreset = true
			if s, ok := d.str(v, f); ok {
				if err := CheckPreset(s); err != nil {
					d.fail(v, f, "%s: %v", lastKey(field), err)
				}
				a.Preset = s
			}
		case "args":
			a.Args, _ = d.strList(v, f, func(s string) error {
				if strings.TrimSpace(s) == "" {
					return fmt.Errorf("empty word: every element is one argument, like [-m, gpt-5]")
				}
				return nil
			})
			d.agentTemplates(v, f)
		default:
			d.unknownKey(k, field, []string{"preset", "args"}, nil, "", "")
		}
	})
	if !hasPreset {
		d.fail(n, field+".preset", "%s: missing preset: want {preset: NAME, args: [...]} with NAME one of %s", lastKey(field), strings.Join(AgentPresets, ", "))
	}
	return a
}

// fallback reads `fallback:`: a list of preset names tried in order when the
// agent cannot start or says it is unavailable.
func (d *planDecoder) fallback(n *yaml.Node, field string) []string {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		d.fail(n, field, "%s: want a list of preset names, like [%s], got the string %q", lastKey(field), clip(n.Value, 40), clip(n.Value, 40))
		return nil
	}
	names, _ := d.strList(n, field, CheckPreset)
	return names
}
