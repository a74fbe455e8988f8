package plan

import (
	"gopkg.in/yaml.v3"

	"github.com/stepseq/stepseq/planspec"
)

// approval reads a gate's setting: a step's `approve: true` (false: none) or
// a plan's `approval: required`, or either as {timeout, onTimeout}. word is
// what the scalar form takes: "true" or "required".
func (d *planDecoder) approval(n *yaml.Node, field, word string) *planspec.Approval {
	like := "true"
	if word == planspec.ApprovalRequired {
		like = planspec.ApprovalRequired
	}
	switch {
	case n.Kind == yaml.AliasNode:
		d.alias(n, field)
		return nil
	case n.Kind == yaml.ScalarNode && n.Value == word && (word != "true" || n.ShortTag() == "!!bool"):
		return &planspec.Approval{}
	case n.Kind == yaml.ScalarNode && word == "true" && n.ShortTag() == "!!bool" && n.Value == "false":
		return nil
	case n.Kind != yaml.MappingNode:
		d.fail(n, field, "%s: want %s, or {timeout: 2h, onTimeout: reject|approve} to bound the wait, got %s", lastKey(field), like, describeNode(n))
		return nil
	}
	a := &planspec.Approval{}
	d.fields(n, field, func(key, f string, k, v *yaml.Node) {
		switch key {
		case "timeout":
			a.Timeout = d.duration(v, f)
		case "onTimeout":
			a.OnTimeout = d.oneOf(v, f, planspec.OnTimeoutWords)
		default:
			d.unknownKey(k, field, []string{"timeout", "onTimeout"}, nil, "", "")
		}
	})
	if a.OnTimeout != "" && a.Timeout == 0 {
		d.fail(n, field, "%s: onTimeout without a timeout: give timeout too, like {timeout: 2h, onTimeout: %s}", lastKey(field), a.OnTimeout)
	}
	return a
}
