package plan

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/stepseq/stepseq/planspec"
	"gopkg.in/yaml.v3"
)

// isGroupNode reports whether an entry of steps is a repeat group: a mapping
// with repeat or steps.
func isGroupNode(n *yaml.Node) bool {
	return n.Kind == yaml.MappingNode && (hasKey(n, "repeat") || hasKey(n, "steps"))
}

// group reads a repeat group: its id, title and repeat, and its
// steps, which unique checks against every other id of the plan. It returns the
// group's id node when the id is valid.
func (d *planDecoder) group(n *yaml.Node, field string, unique func(id string, idNode *yaml.Node, field string)) (planspec.Group, []PlanStep, *yaml.Node) {
	var g planspec.Group
	var idNode, stepsNode, totalsNode *yaml.Node
	hasRepeat, hasID := false, false
	d.fields(n, field, func(key, f string, k, v *yaml.Node) {
		switch key {
		case "id":
			hasID = true
			s, ok := d.str(v, f)
			if !ok {
				return
			}
			g.ID = s
			if err := planspec.CheckID("id", s); err != nil {
				d.fail(v, f, "%v", err)
				return
			}
			idNode = v
		case "title":
			g.Title = d.text(v, f, `a short line, like "Review until it converges"`)
		case "repeat":
			hasRepeat = true
			d.repeat(v, f, &g)
		case "steps":
			stepsNode = v
		case "totals":
			totalsNode = v
		case "needs":
			ids, _ := d.strList(v, f, nil)
			d.gk.needs = append(d.gk.needs, needsRef{node: v, field: f, ids: ids, owner: groupMark})
			d.gk.graph = true
		default:
			if slices.Contains(stepKeys, key) {
				d.fail(k, f, "key %q does not belong to a group: its steps take it; move it into an entry of the group's steps", key)
				return
			}
			d.unknownKey(k, field, groupKeys, stepKeys, "step", "which goes in an entry of the group's steps")
		}
	})
	what := "this group"
	if idNode != nil {
		what = fmt.Sprintf("group %q", g.ID)
	}
	if !hasID {
		d.fail(n, field+".id", "missing id: a group needs a unique id, like \"rounds\"")
	}
	if !hasRepeat {
		d.fail(n, field+".repeat", "missing repeat in %s: a group of steps is a loop; say how many rounds, like repeat: {max: 5}", what)
	}
	if stepsNode == nil {
		d.fail(n, field+".steps", "missing steps in %s: want the list of steps each round runs", what)
		d.ownGroupNeeds(g.ID)
		return g, nil, idNode
	}
	if stepsNode.Kind != yaml.SequenceNode || len(stepsNode.Content) == 0 {
		d.fail(stepsNode, field+".steps", "steps: want a non-empty list of steps, each with id, title and instruction, got %s", describeNode(stepsNode))
		d.ownGroupNeeds(g.ID)
		return g, nil, idNode
	}
	var out []PlanStep
	for i, sn := range stepsNode.Content {
		f := fmt.Sprintf("%s.steps[%d]", field, i)
		if isGroupNode(sn) {
			d.fail(sn, f, "groups do not nest: this group is inside %s; move it out to the plan's steps, before or after %s, or make its steps plain steps of %s", what, what, what)
			continue
		}
		needsAt := len(d.gk.needs)
		st, stID := d.step(sn, f)
		for j := needsAt; j < len(d.gk.needs); j++ {
			d.gk.needs[j].group = groupMark
		}
		unique(st.ID, stID, f+".id")
		out = append(out, st)
		g.Steps = append(g.Steps, st.ID)
	}
	d.ownGroupNeeds(g.ID)
	if totalsNode != nil {
		g.Totals = d.totals(totalsNode, field+".totals", &g, out)
	}
	return g, out, idNode
}

// ownGroupNeeds names group id in the needs lists read in it: its own, and
// those of its steps (which may not have any).
func (d *planDecoder) ownGroupNeeds(id string) {
	for i := range d.gk.needs {
		r := &d.gk.needs[i]
		if r.owner == groupMark {
			r.owner = id
		}
		if r.group == groupMark || r.owner == id {
			r.group = id
		}
	}
}

// groupMark stands for the group being read in its needs lists, until its id
// is known: a group's id may come after its needs.
const groupMark = "\x00group"

// repeat reads a group's repeat: {max: N or EXPR, onMax: block | done}.
func (d *planDecoder) repeat(n *yaml.Node, field string, g *planspec.Group) {
	if n.Kind != yaml.MappingNode {
		hint := ""
		if n.Kind == yaml.ScalarNode && !isNullNode(n) {
			hint = fmt.Sprintf(", like {max: %s}", planspec.Clip(n.Value, 40))
		}
		d.fail(n, field, "repeat: want a mapping {max: N, onMax: block | done}%s, got %s", hint, describeNode(n))
		return
	}
	hasMax := false
	d.fields(n, field, func(key, f string, k, v *yaml.Node) {
		switch key {
		case "max":
			hasMax = true
			g.Max = d.maxRounds(v, f)
		case "onMax":
			g.OnMax = d.oneOf(v, f, planspec.OnMaxWords)
		default:
			d.unknownKey(k, field, []string{"max", "onMax"}, nil, "", "")
		}
	})
	if !hasMax {
		d.fail(n, field+".max", "repeat: missing max: want the number of rounds, like {max: 5}, or an expression, like {max: params.max_rounds}")
	}
}

// maxRounds reads repeat.max: a whole number from 1 to MaxRounds, or an
// expression giving one when the loop starts.
func (d *planDecoder) maxRounds(n *yaml.Node, field string) string {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int" {
		v, err := strconv.Atoi(n.Value)
		if err != nil || v < 1 || v > planspec.MaxRounds {
			d.fail(n, field, "max: want a whole number of rounds from 1 to %d, got %s", planspec.MaxRounds, planspec.Clip(n.Value, 40))
			return ""
		}
		return strconv.Itoa(v)
	}
	src, ok := d.str(n, field)
	if !ok {
		return ""
	}
	c, err := compileTemplateExpr(src)
	if err != nil {
		d.exprError(n, field, err, "expression")
		return ""
	}
	if c.namesAny() {
		d.refs = append(d.refs, stepRef{node: n, field: field, key: "max", cond: c})
	}
	return src
}
