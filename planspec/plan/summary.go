package plan

import (
	"maps"
	"slices"

	"gopkg.in/yaml.v3"
)

// summary reads the plan's summary: a mapping of names to expressions,
// each compiled as a template's expression is.
func (d *planDecoder) summary(n *yaml.Node, field string) map[string]string {
	if n.Kind != yaml.MappingNode {
		d.fail(n, field, "summary: want a mapping of names to expressions, like {fixed: steps.fix.result.count}, got %s", describeNode(n))
		return nil
	}
	out := map[string]string{}
	d.pairs(n, field, func(name string, _, v *yaml.Node) {
		f := field + "." + name
		src, ok := d.str(v, f)
		if !ok {
			return
		}
		c, err := compileTemplateExpr(src)
		if err != nil {
			d.exprError(v, f, err, "expression")
			return
		}
		if c.namesAny() {
			d.refs = append(d.refs, stepRef{node: v, field: f, key: name, cond: c})
		}
		out[name] = src
	})
	return out
}

// EvalSummary evaluates a plan's summary expressions against env. One that
// does not compile or fails gives its error's text, so that the rest are kept.
func EvalSummary(summary map[string]string, env *Env) map[string]any {
	if env == nil {
		env = &Env{}
	}
	out := make(map[string]any, len(summary))
	for _, name := range slices.Sorted(maps.Keys(summary)) {
		c, err := compileTemplateExpr(summary[name])
		var v any
		if err == nil {
			v, err = c.evalValue(env)
		}
		if err != nil {
			v = "error: " + err.Error()
		}
		out[name] = v
	}
	return out
}
