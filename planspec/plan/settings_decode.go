package plan

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/stepseq/stepseq/planspec"
	"gopkg.in/yaml.v3"
)

// agent reads `agent:`: an argv list, a preset name, or {preset: NAME, args: [...]}.
func (d *planDecoder) agent(n *yaml.Node, field string) planspec.AgentSpec {
	switch {
	case n.Kind == yaml.AliasNode:
		d.alias(n, field)
	case n.Kind == yaml.SequenceNode:
		argv := d.words(n, field)
		d.agentTemplates(n, field)
		if err := planspec.CheckAgentArgv(argv, nil); err != nil {
			d.fail(n, field, "%s: %v", lastKey(field), err)
			d.errs[len(d.errs)-1].Err = err
		}
		return planspec.AgentSpec{Argv: argv}
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str":
		if err := planspec.CheckPreset(n.Value); err != nil {
			d.fail(n, field, "%s: %v", lastKey(field), err)
		}
		return planspec.AgentSpec{Preset: n.Value}
	case n.Kind == yaml.MappingNode:
		return d.agentMapping(n, field)
	default:
		d.fail(n, field, "%s: want a preset name (%s), {preset: NAME, args: [...]} or the command as a list, like [openclaw, agent, --message], got %s%s",
			lastKey(field), strings.Join(planspec.AgentPresets, ", "), describeNode(n), scalarHint(n))
	}
	return planspec.AgentSpec{}
}

func (d *planDecoder) agentMapping(n *yaml.Node, field string) planspec.AgentSpec {
	var a planspec.AgentSpec
	hasPreset := false
	d.pairs(n, field, func(key string, k, v *yaml.Node) {
		f := field + "." + key
		switch key {
		case "preset":
			hasPreset = true
			if s, ok := d.str(v, f); ok {
				if err := planspec.CheckPreset(s); err != nil {
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
		d.fail(n, field+".preset", "%s: missing preset: want {preset: NAME, args: [...]} with NAME one of %s", lastKey(field), strings.Join(planspec.AgentPresets, ", "))
	}
	return a
}

// fallback reads `fallback:`: a list of preset names tried in order when the
// agent cannot start or says it is unavailable.
func (d *planDecoder) fallback(n *yaml.Node, field string) []string {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		d.fail(n, field, "%s: want a list of preset names, like [%s], got the string %q", lastKey(field), planspec.Clip(n.Value, 40), planspec.Clip(n.Value, 40))
		return nil
	}
	names, _ := d.strList(n, field, planspec.CheckPreset)
	return names
}

// oneOf reads a string that is one of words; "" when it is not (reported).
func (d *planDecoder) oneOf(n *yaml.Node, field string, words []planspec.Word) string {
	s, ok := d.str(n, field)
	if !ok {
		return ""
	}
	if err := planspec.CheckWord(s, words); err != nil {
		d.fail(n, field, "%s: %v", lastKey(field), err)
		return ""
	}
	return s
}

// runSetting reads key into r when it is one of those keys; false when not.
func (d *planDecoder) runSetting(r planspec.RunSettings, key string, v *yaml.Node, f string) bool {
	switch key {
	case "agent":
		*r.Agent = d.agent(v, f)
	case "fallback":
		*r.Fallback = d.fallback(v, f)
	case "reports":
		*r.Reports = d.oneOf(v, f, planspec.ReportsWords)
	case "timeout":
		*r.Timeout = d.duration(v, f)
	case "launchTimeout":
		*r.LaunchTimeout = d.duration(v, f)
	case "milestoneTimeout":
		*r.MilestoneTimeout = d.duration(v, f)
	case "idleTimeout":
		*r.IdleTimeout = d.duration(v, f)
	case "limitWait":
		*r.LimitWait = d.duration(v, f)
	case "sandbox":
		*r.Sandbox = d.sandbox(v, f)
	default:
		return false
	}
	return true
}

// sandbox reads `sandbox:`: true, false, or {network, write, read, env}.
func (d *planDecoder) sandbox(n *yaml.Node, field string) *planspec.Sandbox {
	switch {
	case n.Kind == yaml.AliasNode:
		d.alias(n, field)
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool":
		on, _ := d.boolean(n, field)
		return &planspec.Sandbox{On: on}
	case n.Kind == yaml.MappingNode:
		sb := &planspec.Sandbox{On: true}
		d.fields(n, field, func(key, f string, k, v *yaml.Node) {
			switch key {
			case "network":
				if on, ok := d.boolean(v, f); ok {
					sb.NoNetwork = !on
				}
			case "write":
				sb.Write, _ = d.strList(v, f, planspec.CheckSandboxPath)
			case "read":
				sb.Read, _ = d.strList(v, f, planspec.CheckSandboxPath)
			case "env":
				sb.Env, _ = d.strList(v, f, planspec.CheckSandboxEnv)
			default:
				d.unknownKey(k, field, planspec.SandboxKeys, nil, "", "")
			}
		})
		return sb
	default:
		d.fail(n, field, "%s: want true, false or {network: BOOL, write: [PATHS], read: [PATHS], env: [NAMES]}, got %s%s",
			lastKey(field), describeNode(n), scalarHint(n))
	}
	return nil
}

// budget reads `budget: {usd: 5, tokens: 2000000, tries: 30, wall: 4h}`: each
// bound optional, none zero (a bound of nothing would stop the run before its
// first try).
func (d *planDecoder) budget(n *yaml.Node, field string) planspec.Budget {
	var b planspec.Budget
	if n.Kind != yaml.MappingNode {
		d.fail(n, field, "%s: want a mapping of bounds, like {usd: 5, tokens: 2000000, tries: 30, wall: 4h}, got %s", lastKey(field), describeNode(n))
		return b
	}
	d.pairs(n, field, func(key string, k, v *yaml.Node) {
		f := field + "." + key
		if !slices.Contains(planspec.BudgetKeys, key) {
			d.unknownKey(k, field, planspec.BudgetKeys, nil, "", "")
			return
		}
		if v.Kind != yaml.ScalarNode || isNullNode(v) {
			d.fail(v, f, "%s: want a value, like %s", key, budgetExample(key))
			return
		}
		one, err := planspec.ParseBudget(key + "=" + v.Value)
		switch {
		case err != nil:
			d.fail(v, f, "%s: %v", key, err)
		case one.IsZero():
			d.fail(v, f, "%s: want a bound above 0, like %s: leave the key out for no bound", key, budgetExample(key))
		default:
			b = mergeBudget(b, one)
		}
	})
	return b
}

func budgetExample(key string) string {
	return map[string]string{planspec.BudgetUSD: "5", planspec.BudgetTokens: "2000000", planspec.BudgetTries: "30", planspec.BudgetWall: "4h"}[key]
}

func mergeBudget(b, o planspec.Budget) planspec.Budget {
	b.USD = max(b.USD, o.USD)
	b.Tokens = max(b.Tokens, o.Tokens)
	b.Tries = max(b.Tries, o.Tries)
	b.Wall = max(b.Wall, o.Wall)
	return b
}

// prices reads `prices: {codex: {input: 1.25, output: 10, cache: 0.125}}`:
// USD per million tokens, by model or preset.
func (d *planDecoder) prices(n *yaml.Node, field string) map[string]planspec.Price {
	v, ok := d.value(n, field, 0)
	if !ok {
		return nil
	}
	raw, err := json.Marshal(v)
	if err == nil {
		var prices map[string]planspec.Price
		if prices, err = planspec.ParsePrices(raw); err == nil {
			return prices
		}
	}
	d.fail(n, field, "prices: %v", err)
	return nil
}
