package plan

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/stepseq/stepseq/planspec"
	"gopkg.in/yaml.v3"
)

// A plan whose steps say what they need is a graph: the steps whose needs are
// met run side by side. Read here: needs, foreach, continueOnFailure, worktree
// and merge on a step, needs on a repeat group (which is one node of the
// graph, its steps a line inside it), maxParallel, worktree and merge on the
// plan. Once every step is read, the needs are checked (an unknown id, a
// cycle, a step inside a group named from outside it) and resolved: a step
// without needs waits for the step written before it.

// needsRef is a needs list as written, for its errors.
type needsRef struct {
	owner string // the step or group that says it
	group string // the group that owner is inside, "" when none
	node  *yaml.Node
	field string
	ids   []string
}

// graphKeys is the part of a plan's decoding that reads its graph.
type graphKeys struct {
	needs    []needsRef
	foreach  map[string]*yaml.Node // foreach step → its foreach node
	worktree bool                  // the plan says worktree: true
	merge    string                // the plan's merge
	graph    bool                  // a key that makes the plan a graph was read
	// itemUses are the texts that read item or index, by the step they are in.
	itemUses map[string][]itemUse
	// offSteps are the steps that say worktree: false.
	offSteps []string
}

type itemUse struct {
	node  *yaml.Node
	field string
}

// planGraph reads a top-level key of the graph; false when key is not one.
func (d *planDecoder) planGraph(p *Plan, key string, v *yaml.Node) bool {
	switch key {
	case "maxParallel":
		if n := d.count(v, key); n != nil {
			if *n == 0 {
				d.fail(v, key, "maxParallel: want at least 1 (the most agents of this run at once); leave it out for no bound")
			}
			p.MaxParallel = *n
		}
	case "worktree":
		d.gk.worktree, _ = d.boolean(v, key)
		d.gk.graph = d.gk.graph || d.gk.worktree
	case "merge":
		d.gk.merge = d.oneOf(v, key, planspec.MergeWords)
	default:
		return false
	}
	return true
}

// stepGraph reads a step key of the graph; false when key is not one.
func (d *planDecoder) stepGraph(st *PlanStep, key string, v *yaml.Node, f string, off *bool) bool {
	g := &st.Spec.Graph
	switch key {
	case "needs":
		ids, _ := d.strList(v, f, nil)
		g.Needs = append([]string{}, ids...)
		d.gk.needs = append(d.gk.needs, needsRef{node: v, field: f, ids: ids, owner: st.ID})
		d.gk.graph = true
	case "foreach":
		if src, ok := d.str(v, f); ok {
			if c, err := compileTemplateExpr(src); err != nil {
				d.exprError(v, f, err, "expression")
			} else if c.namesAny() {
				d.refs = append(d.refs, stepRef{node: v, field: f, key: "foreach", cond: c})
			}
			g.Foreach = src
			d.gk.graph = true
			if d.gk.foreach == nil {
				d.gk.foreach = map[string]*yaml.Node{}
			}
			d.gk.foreach[f] = v
		}
	case "continueOnFailure":
		g.ContinueOnFailure, _ = d.boolean(v, f)
	case "worktree":
		b, ok := d.boolean(v, f)
		if ok {
			g.Worktree, *off = b, !b
			d.gk.graph = d.gk.graph || b
		}
	case "merge":
		g.Merge = d.oneOf(v, f, planspec.MergeWords)
	default:
		return false
	}
	return true
}

// noteItemUse remembers a text of the step at field that reads item or index:
// only a foreach step's instances have them.
func (d *planDecoder) noteItemUse(n *yaml.Node, field string, c *Condition) {
	if c == nil || !c.usesItem {
		return
	}
	if d.gk.itemUses == nil {
		d.gk.itemUses = map[string][]itemUse{}
	}
	step := stepField(field)
	d.gk.itemUses[step] = append(d.gk.itemUses[step], itemUse{node: n, field: field})
}

// stepField is the part of a field that names its step: steps[1] of
// steps[1].instruction, steps[0].steps[2] of steps[0].steps[2].title.
func stepField(field string) string {
	if i := strings.LastIndex(field, "]."); i >= 0 {
		return field[:i+1]
	}
	return field
}

// resolveGraph checks the plan's needs and writes each step's resolved needs,
// worktree and merge, when the plan is a graph; a plan that is not keeps its
// steps as they are.
func (d *planDecoder) resolveGraph(p *Plan, fields map[string]string) {
	d.checkItemUses(p, fields)
	if !d.gk.graph {
		return
	}
	groupOf := map[string]string{} // step → its group
	last := map[string]string{}    // group → its last step
	for _, g := range p.Groups {
		for _, s := range g.Steps {
			groupOf[s] = g.ID
		}
		if len(g.Steps) > 0 {
			last[g.ID] = g.Steps[len(g.Steps)-1]
		}
	}
	ids := make([]string, 0, len(p.Steps)+len(p.Groups))
	for _, s := range p.Steps {
		ids = append(ids, s.ID)
	}
	for _, g := range p.Groups {
		ids = append(ids, g.ID)
	}
	byOwner := map[string]*needsRef{}
	for i := range d.gk.needs {
		r := &d.gk.needs[i]
		d.checkNeeds(r, ids, groupOf, fields)
		byOwner[r.owner] = r
	}
	d.checkForeach(p, groupOf, fields)
	resolve := func(n string) string {
		if l, ok := last[n]; ok {
			return l
		}
		return n
	}
	prev := ""
	for i := range p.Steps {
		s := &p.Steps[i]
		group, inGroup := groupOf[s.ID]
		owner := s.ID
		if inGroup && p.groupFirst(group) == s.ID {
			owner = group
		}
		s.Spec.Needs = resolvedNeeds(byOwner[owner], inGroup && owner == s.ID, prev, resolve)
		d.resolveWorktree(s)
		prev = s.ID
	}
	d.checkCycles(p, byOwner, groupOf)
}

// resolvedNeeds are a step's needs: the step before it inside a group (a
// line), else those it (or its group) wrote, each group named standing for
// its last step, else the step written before it; none for the first.
func resolvedNeeds(r *needsRef, inLine bool, prev string, resolve func(string) string) []string {
	needs := []string{}
	switch {
	case inLine:
		needs = append(needs, prev)
	case r != nil:
		for _, n := range r.ids {
			if n := resolve(n); !slices.Contains(needs, n) && n != "" {
				needs = append(needs, n)
			}
		}
	case prev != "":
		needs = append(needs, prev)
	}
	return needs
}

// resolveWorktree gives a step the plan's worktree, unless it says
// worktree: false, and a worktree step its merge (default auto).
func (d *planDecoder) resolveWorktree(s *PlanStep) {
	if !s.Spec.Worktree && d.gk.worktree && !d.worktreeOff(s.ID) {
		s.Spec.Worktree = true
	}
	if s.Spec.Worktree && s.Spec.Merge == "" {
		s.Spec.Merge = d.gk.merge
		if s.Spec.Merge == "" {
			s.Spec.Merge = planspec.MergeAuto
		}
	}
}

// worktreeOff is a step that says worktree: false under a plan's worktree: true.
func (d *planDecoder) worktreeOff(id string) bool { return slices.Contains(d.gk.offSteps, id) }

// checkNeeds reports the ids of a needs list that name nothing, the step
// itself, or a step inside a group from outside it.
func (d *planDecoder) checkNeeds(r *needsRef, ids []string, groupOf map[string]string, fields map[string]string) {
	if r.group != "" && r.owner != r.group {
		d.fail(r.node, r.field, "needs: step %q is inside repeat group %q, whose steps run in a line: put needs on the group (needs: goes beside its repeat:)", r.owner, r.group)
		return
	}
	for i, n := range r.ids {
		f := fmt.Sprintf("%s[%d]", r.field, i)
		at := r.node
		if i < len(r.node.Content) {
			at = r.node.Content[i]
		}
		switch g, inside := groupOf[n]; {
		case n == r.owner:
			d.fail(at, f, "needs: %q needs itself: remove it from its needs", n)
		case !slices.Contains(ids, n):
			msg := fmt.Sprintf("needs: no step %q in this plan", n)
			if s := planspec.Suggest(n, ids); s != "" {
				msg += fmt.Sprintf(": did you mean %q?", s)
			} else {
				msg += ": name a step or a repeat group of this plan"
			}
			d.fail(at, f, "%s", msg)
		case inside && g != r.owner:
			d.fail(at, f, "needs: step %q is inside repeat group %q, which runs as one: name the group instead, needs: [%s]", n, g, g)
		}
	}
}

// checkForeach refuses a foreach inside a repeat group: a group's steps are a
// line, and a foreach's instances run side by side.
func (d *planDecoder) checkForeach(p *Plan, groupOf map[string]string, fields map[string]string) {
	for _, s := range p.Steps {
		if s.Spec.Foreach == "" {
			continue
		}
		if g, ok := groupOf[s.ID]; ok {
			n := d.gk.foreach[fields[s.ID]+".foreach"]
			d.fail(n, fields[s.ID]+".foreach", "foreach: step %q is inside repeat group %q, whose steps run in a line: move it out of the group", s.ID, g)
		}
	}
}

// checkItemUses refuses item and index in a step that has no foreach.
func (d *planDecoder) checkItemUses(p *Plan, fields map[string]string) {
	if len(d.gk.itemUses) == 0 {
		return
	}
	foreach := map[string]bool{}
	for _, s := range p.Steps {
		if s.Spec.Foreach != "" {
			foreach[fields[s.ID]] = true
		}
	}
	for step, uses := range d.gk.itemUses {
		if foreach[step] {
			continue
		}
		for _, u := range uses {
			d.fail(u.node, u.field, "%s: item and index are a foreach step's: add foreach: EXPR to this step, or read a param or a result instead", lastKey(u.field))
		}
	}
}

// checkCycles reports a cycle of needs once, at the needs of a step on it.
func (d *planDecoder) checkCycles(p *Plan, byOwner map[string]*needsRef, groupOf map[string]string) {
	needs := make(map[string][]string, len(p.Steps))
	for _, s := range p.Steps {
		needs[s.ID] = s.Spec.Needs
	}
	const (
		unseen = iota
		onPath
		done
	)
	mark := map[string]int{}
	var path []string
	var visit func(id string) []string
	visit = func(id string) []string {
		switch mark[id] {
		case onPath:
			at := slices.Index(path, id)
			return append(slices.Clone(path[at:]), id)
		case done:
			return nil
		}
		mark[id] = onPath
		path = append(path, id)
		for _, n := range needs[id] {
			if cycle := visit(n); cycle != nil {
				return cycle
			}
		}
		path = path[:len(path)-1]
		mark[id] = done
		return nil
	}
	for _, s := range p.Steps {
		cycle := visit(s.ID)
		if cycle == nil {
			continue
		}
		// Told at the needs of the first step on the cycle that wrote some.
		for _, id := range cycle {
			owner := id
			if g, ok := groupOf[id]; ok {
				owner = g
			}
			if r := byOwner[owner]; r != nil {
				slices.Reverse(cycle)
				d.fail(r.node, r.field, "needs: a cycle: %s: each waits for the next, so none can start; remove one of these needs", strings.Join(cycle, " → "))
				return
			}
		}
		return
	}
}

// groupFirst is the first step of group id.
func (p *Plan) groupFirst(id string) string {
	for _, g := range p.Groups {
		if g.ID == id && len(g.Steps) > 0 {
			return g.Steps[0]
		}
	}
	return ""
}

// IsGraph reports whether the plan's steps run side by side: they carry their
// needs.
func (p *Plan) IsGraph() bool { return len(p.Steps) > 0 && p.Steps[0].Spec.Needs != nil }

// UsesWorktrees reports whether a step of the plan runs in a git worktree.
func (p *Plan) UsesWorktrees() bool {
	return slices.ContainsFunc(p.Steps, func(s PlanStep) bool { return s.Spec.Worktree })
}

// queueOrder is the plan's steps in an order where each comes after what it
// needs, as close to the order they are written in as that allows: at each
// place, the first step written whose needs are all placed. A repeat group's
// steps stay together, in their order.
func (p *Plan) queueOrder() []string {
	if !p.IsGraph() {
		out := make([]string, len(p.Steps))
		for i, s := range p.Steps {
			out[i] = s.ID
		}
		return out
	}
	groupOf := map[string]*planspec.Group{}
	for i := range p.Groups {
		for _, s := range p.Groups[i].Steps {
			groupOf[s] = &p.Groups[i]
		}
	}
	placed := make(map[string]bool, len(p.Steps))
	out := make([]string, 0, len(p.Steps))
	ready := func(s PlanStep) bool {
		for _, n := range s.Spec.Needs {
			if !placed[n] {
				return false
			}
		}
		return true
	}
	for len(out) < len(p.Steps) {
		progress := false
		for _, s := range p.Steps {
			if placed[s.ID] || !ready(s) {
				continue
			}
			steps := []string{s.ID}
			if g := groupOf[s.ID]; g != nil {
				steps = g.Steps // the first step is ready: the rest need only it and each other
			}
			for _, id := range steps {
				placed[id] = true
				out = append(out, id)
			}
			progress = true
			break
		}
		if !progress {
			break // a cycle, which validation refuses
		}
	}
	return out
}

// EvalForeach evaluates a foreach expression to its list: at most
// planspec.MaxForeachItems items. Anything else is an error that says what it
// gave.
func EvalForeach(src string, env *Env) ([]any, error) {
	c, err := compileTemplateExpr(src)
	if err != nil {
		return nil, err
	}
	if env == nil {
		env = &Env{}
	}
	v, err := c.evalValue(env)
	if err != nil {
		return nil, err
	}
	var items []any
	switch v := v.(type) {
	case []any:
		items = v
	case []string:
		for _, s := range v {
			items = append(items, s)
		}
	case []int:
		for _, n := range v {
			items = append(items, n)
		}
	case nil:
		return nil, fmt.Errorf("%s gave nil, want a list: a result, key or param that is not there", planspec.Clip(src, 80))
	default:
		return nil, fmt.Errorf("%s gave %s, want a list", planspec.Clip(src, 80), describeValue(v))
	}
	if len(items) > planspec.MaxForeachItems {
		return nil, fmt.Errorf("%s gave %d items, more than the %d a foreach takes: split the list, or run the work in fewer steps",
			planspec.Clip(src, 80), len(items), planspec.MaxForeachItems)
	}
	if items == nil {
		items = []any{}
	}
	return items, nil
}

// ItemEnv is env as a step's texts see it: a foreach instance's item and
// index set; env itself for any other step.
func ItemEnv(env *Env, spec *planspec.StepSpec) *Env {
	if spec == nil || spec.Of == "" {
		return env
	}
	e := *env
	if len(spec.Item) > 0 {
		_ = json.Unmarshal(spec.Item, &e.Item) // written by json.Marshal
		e.Item = planspec.WholeNumbers(e.Item)
	}
	e.Index = spec.Index
	return &e
}

// RenderInstance renders a foreach instance as it is made: its title,
// instruction and agent (RenderSpec), and its required outputs, with its
// item. The texts keep their templates, rendered again when a try starts.
func RenderInstance(spec *planspec.StepSpec, planAgent planspec.AgentSpec, env *Env) (*planspec.StepSpec, error) {
	out, err := RenderSpec(spec, planAgent, env)
	if err != nil {
		return nil, err
	}
	env = ItemEnv(env, spec)
	var outputs []string
	for i, o := range spec.RequiredOutputs {
		if !planspec.HasTemplate(o) {
			continue
		}
		t, err := CompileTemplate(o)
		if err != nil {
			return nil, fmt.Errorf("requiredOutputs[%d]: %w", i, err)
		}
		s, err := t.Render(env)
		if err == nil {
			err = planspec.CheckPath(s)
		}
		if err != nil {
			return nil, fmt.Errorf("requiredOutputs[%d]: %w", i, err)
		}
		if outputs == nil {
			outputs = slices.Clone(spec.RequiredOutputs)
		}
		outputs[i] = s
	}
	if outputs != nil {
		if out == spec {
			c := *spec
			out = &c
		}
		out.RequiredOutputs = outputs
	}
	return out, nil
}
