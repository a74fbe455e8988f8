package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/stepseq/stepseq/planspec"
	"gopkg.in/yaml.v3"
)

// plan reads the top-level mapping.
func (d *planDecoder) plan(n *yaml.Node) *Plan {
	p := &Plan{}
	if n.Kind != yaml.MappingNode {
		d.fail(n, "", "want a plan: a mapping with steps (and name, agent, stepDelay, …), got %s", describeNode(n))
		return p
	}
	var steps *yaml.Node
	d.fields(n, "", func(key, _ string, k, v *yaml.Node) {
		if d.planDefault(p, key, v) || d.planGraph(p, key, v) {
			return
		}
		switch key {
		case "name":
			if s, ok := d.str(v, key); ok {
				if err := planspec.CheckID("plan name", s); err != nil {
					d.fail(v, key, "name: %v", err)
				}
				p.Name = s
			}
		case "vars":
			p.Vars = d.vars(v, key)
		case "params":
			p.Params = d.params(v, key)
		case "summary":
			p.Summary = d.summary(v, key)
		case "steps":
			steps = v
		default:
			d.unknownKey(k, "", planKeys, stepKeys, "step", "which goes in an entry of steps")
		}
	})
	if steps == nil {
		d.fail(n, "steps", "missing steps: want a list of steps, each with id, title and instruction")
		return p
	}
	if steps.Kind != yaml.SequenceNode || len(steps.Content) == 0 {
		d.fail(steps, "steps", "steps: want a non-empty list of steps, each with id, title and instruction, got %s", describeNode(steps))
		return p
	}
	first, fields := d.planSteps(p, steps)
	d.checkPulledOutputs(p, steps)
	d.compileConditions(p)
	d.resolveGraph(p, fields)
	d.checkRefs(first, p.Vars, p.ParamNames())
	d.checkParamTypes(p.Params)
	d.checkResultTypes(p.Params)
	return p
}

// planDefault reads a top-level key that sets how the plan's steps run by
// default (agent, timeouts, reports, notify, …); false when key is not one.
func (d *planDecoder) planDefault(p *Plan, key string, v *yaml.Node) bool {
	if d.runSetting(p.Settings.RunSettings(), key, v, key) {
		return true
	}
	switch key {
	case "stepDelay":
		p.StepDelay = d.duration(v, key)
	case "maxRetries":
		p.MaxRetries = d.count(v, key)
	case "heartbeat":
		p.Heartbeat = d.duration(v, key)
	case "resume":
		p.Resume, _ = d.boolean(v, key)
	case "notify":
		p.Notify = d.notify(v, key)
	case "approval":
		p.Approval = d.approval(v, key, planspec.ApprovalRequired)
	case "budget":
		p.Budget = d.budget(v, key)
	case "prices":
		p.Prices = d.prices(v, key)
	default:
		return false
	}
	return true
}

// vars reads the plan's vars: a mapping of names to values.
func (d *planDecoder) vars(v *yaml.Node, key string) map[string]any {
	if v.Kind != yaml.MappingNode {
		d.fail(v, key, "vars: want a mapping of names to values, like {topic: solar}, got %s", describeNode(v))
		return nil
	}
	if vars, ok := d.value(v, key, 0); ok {
		return vars.(map[string]any)
	}
	return nil
}

// planSteps reads the entries of steps, steps and repeat groups, into p and
// returns each id with the line of its first step, and each step's field
// (steps[1]); an id seen twice is an error.
func (d *planDecoder) planSteps(p *Plan, steps *yaml.Node) (map[string]int, map[string]string) {
	p.Steps = make([]PlanStep, 0, len(steps.Content))
	first := map[string]int{} // id → line of its first step
	fields := map[string]string{}
	unique := func(id string, idNode *yaml.Node, field string) {
		if idNode == nil {
			return
		}
		if line, dup := first[id]; dup {
			d.fail(idNode, field, "duplicate id %q: the first is at line %d; ids must be unique", id, line)
		} else {
			first[id] = idNode.Line
		}
	}
	for i, sn := range steps.Content {
		field := fmt.Sprintf("steps[%d]", i)
		if isGroupNode(sn) {
			g, gsteps, idNode := d.group(sn, field, unique)
			unique(g.ID, idNode, field+".id")
			p.Groups = append(p.Groups, g)
			for j, s := range gsteps {
				fields[s.ID] = fmt.Sprintf("%s.steps[%d]", field, j)
			}
			p.Steps = append(p.Steps, gsteps...)
			continue
		}
		st, idNode := d.step(sn, field)
		unique(st.ID, idNode, field+".id")
		fields[st.ID] = field
		p.Steps = append(p.Steps, st)
	}
	return first, fields
}

// checkPulledOutputs refuses resultFrom: output on a pulled step: its worker
// has no output to read the result from.
func (d *planDecoder) checkPulledOutputs(p *Plan, steps *yaml.Node) {
	for i, st := range p.Steps {
		if st.Spec.ResultFrom == planspec.ResultFromOutput && (planspec.IsPull(st.Spec.Agent) || st.Spec.Agent.IsZero() && planspec.IsPull(p.Agent)) {
			d.fail(steps.Content[i], fmt.Sprintf("steps[%d].resultFrom", i), "resultFrom: output: a pulled step (agent: mcp) has no output: its worker reports the result with step_report, or writes it to a file (resultFrom: file:PATH)")
		}
	}
}

// step reads one entry of steps. It returns the id's node when the id is valid.
func (d *planDecoder) step(n *yaml.Node, field string) (PlanStep, *yaml.Node) {
	var st PlanStep
	if n.Kind == yaml.AliasNode {
		d.alias(n, field)
		return st, nil
	}
	if n.Kind != yaml.MappingNode {
		d.fail(n, field, "want a step: a mapping with id, title and instruction, got %s", describeNode(n))
		return st, nil
	}
	sp := &st.Spec
	var idNode *yaml.Node
	needsAt, worktreeOff := len(d.gk.needs), false
	d.fields(n, field, func(key, f string, k, v *yaml.Node) {
		switch key {
		case "id":
			if id, ok := d.stepID(v, f); ok {
				st.ID = id
				if planspec.CheckID("id", id) == nil {
					idNode = v
				}
			}
		case "title":
			sp.Title = d.text(v, f, `a short line, like "Write the paper"`)
			d.template(v, f, sp.Title)
		case "instruction":
			sp.Instruction = d.text(v, f, "the prompt the agent gets")
			d.template(v, f, sp.Instruction)
		default:
			if !d.stepCondition(sp, key, v, f) && !d.stepRun(sp, key, v, f) && !d.stepResult(sp, key, v, f) &&
				!d.stepGraph(&st, key, v, f, &worktreeOff) {
				d.unknownKey(k, field, stepKeys, planKeys, "plan", "which goes at the top of the file")
			}
		}
	})
	for i := needsAt; i < len(d.gk.needs); i++ {
		d.gk.needs[i].owner = st.ID // the id may come after needs
	}
	if worktreeOff {
		d.gk.offSteps = append(d.gk.offSteps, st.ID)
	}
	d.stepRequired(n, field, st.ID, idNode != nil)
	return st, idNode
}

// stepID reads a step's id; ok when v is a string, which the step keeps even
// when it is not a valid id (that is reported here).
func (d *planDecoder) stepID(v *yaml.Node, f string) (id string, ok bool) {
	if isNullNode(v) {
		d.fail(v, f, "empty id: want letters, digits, \".\", \"_\" or \"-\", like \"build\"")
		return "", false
	}
	s, ok := d.str(v, f)
	if !ok {
		return "", false
	}
	if err := planspec.CheckID("id", s); err != nil {
		d.fail(v, f, "%v", err)
	}
	return s, true
}

// stepRequired reports the id, title and instruction a step lacks; one given
// as an alias is there (and refused as an alias).
func (d *planDecoder) stepRequired(n *yaml.Node, field, id string, validID bool) {
	what := "this step"
	if validID {
		what = fmt.Sprintf("step %q", id)
	}
	if !hasKey(n, "id") {
		d.fail(n, field+".id", "missing id: every step needs a unique id, like \"build\"")
	}
	if !hasKey(n, "title") {
		d.fail(n, field+".title", "missing title in %s: want a short line, like \"Write the paper\"", what)
	}
	if !hasKey(n, "instruction") {
		d.fail(n, field+".instruction", "missing instruction in %s: want the prompt the agent gets", what)
	}
}

// stepCondition reads a key that says when the step runs, is skipped, is done
// or aborts, or which files it follows; false when key is not one.
func (d *planDecoder) stepCondition(sp *planspec.StepSpec, key string, v *yaml.Node, f string) bool {
	switch key {
	case "when":
		sp.When = d.condition(v, f)
	case "skip":
		sp.Skip = d.condition(v, f)
	case "check":
		sp.Check = d.condition(v, f)
	case "exit":
		sp.Exit = d.condition(v, f)
	case "abort":
		d.abort(sp, v, f)
	case "on":
		sp.On, _ = d.strList(v, f, planspec.CheckGlob)
	default:
		return false
	}
	return true
}

// stepRun reads a key that says how the step's agent runs: which agent, its
// deadlines, its retries, its reports; false when key is not one.
func (d *planDecoder) stepRun(sp *planspec.StepSpec, key string, v *yaml.Node, f string) bool {
	if d.runSetting(sp.RunSettings(), key, v, f) {
		return true
	}
	switch key {
	case "awaitOutputs":
		sp.AwaitOutputs = d.duration(v, f)
	case "retries":
		sp.Retries = d.count(v, f)
	case "budget":
		sp.Budget = d.budget(v, f)
	case "resume":
		if b, ok := d.boolean(v, f); ok {
			sp.Resume = &b
		}
	case "approve":
		sp.Approve = d.approval(v, f, "true")
	default:
		return false
	}
	return true
}

// stepResult reads a key that says what the step must leave: its outputs and
// its result, where the result is read from and what an invalid one does;
// false when key is not one.
func (d *planDecoder) stepResult(sp *planspec.StepSpec, key string, v *yaml.Node, f string) bool {
	switch key {
	case "requiredOutputs":
		sp.RequiredOutputs, _ = d.strList(v, f, planspec.CheckPath)
	case "result":
		sp.Result = d.resultSchema(v, f)
		if len(sp.Result) > 0 {
			if d.results == nil {
				d.results = map[string]json.RawMessage{}
			}
			d.results[strings.TrimSuffix(f, ".result")] = sp.Result
		}
	case "onInvalid":
		sp.OnInvalid = d.oneOf(v, f, planspec.OnInvalidWords)
	case "resultFrom":
		if s, ok := d.str(v, f); ok {
			if err := planspec.CheckResultFrom(s); err != nil {
				d.fail(v, f, "%v", err)
			} else {
				sp.ResultFrom = s
			}
		}
	default:
		return false
	}
	return true
}

// text reads a required, non-blank string.
func (d *planDecoder) text(n *yaml.Node, field, hint string) string {
	if isNullNode(n) {
		d.fail(n, field, "empty %s: want %s", lastKey(field), hint)
		return ""
	}
	s, ok := d.str(n, field)
	if ok && strings.TrimSpace(s) == "" {
		d.fail(n, field, "empty %s: want %s", lastKey(field), hint)
	}
	return s
}

// condition reads a when, skip or check expression; compileConditions compiles
// them once the walk is over.
func (d *planDecoder) condition(n *yaml.Node, field string) string {
	src, ok := d.str(n, field)
	if ok {
		d.conds = append(d.conds, pendingCondition{node: n, field: field, src: src})
	}
	return src
}

// compileConditions type-checks the plan's conditions, on every CPU when there
// are many: checking is most of the cost of validating a large plan. Errors are
// reported in plan order whatever order the compilations finish in. The
// conditions that read env() are kept in p, located, for CheckEnv.
func (d *planDecoder) compileConditions(p *Plan) {
	results := make([]*Condition, len(d.conds))
	errs := make([]error, len(d.conds))
	compile := func(i int) { results[i], errs[i] = checkCondition(d.conds[i].src) }
	workers := min(runtime.GOMAXPROCS(0), 8, len(d.conds)/64+1)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(d.conds); i += workers {
				compile(i)
			}
		})
	}
	wg.Wait()
	for i, pc := range d.conds {
		if errs[i] != nil {
			d.conditionError(pc.node, pc.field, errs[i])
			continue
		}
		c := results[i]
		d.noteItemUse(pc.node, pc.field, c)
		if c.namesAny() {
			d.refs = append(d.refs, stepRef{node: pc.node, field: pc.field, key: lastKey(pc.field), cond: c})
		}
		if c.readsEnv {
			p.envUses = append(p.envUses, &PlanError{File: d.file, Line: pc.node.Line, Col: pc.node.Column, Field: pc.field, Msg: lastKey(pc.field)})
			p.envConds = append(p.envConds, c)
		}
	}
}

func (d *planDecoder) conditionError(n *yaml.Node, field string, err error) {
	d.exprError(n, field, err, "expression")
}

// exprError reports the error of a condition or a template (what) at n,
// located in the file when the text is written on one line as it is.
func (d *planDecoder) exprError(n *yaml.Node, field string, err error, what string) {
	var ce *ConditionError
	if !errors.As(err, &ce) {
		d.fail(n, field, "%s: %v", lastKey(field), err)
		return
	}
	line, col := n.Line, n.Column
	msg := lastKey(field) + ": " + ce.Msg
	switch {
	case ce.Line == 0:
	case ce.Line == 1 && n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) == 0 && !strings.Contains(n.Value, "\n") && !strings.Contains(n.Value, `\`):
		// One line, as written: the column in the expression is the column in
		// the file, past the opening quote if there is one.
		if n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) != 0 {
			col++
		}
		col += ce.Column - 1
	default:
		msg += fmt.Sprintf(" (at %d:%d in the %s)", ce.Line, ce.Column, what)
	}
	d.failAt(line, col, field, msg)
}

// template compiles a text that holds ${EXPR}: one that does not compile is a
// located error; the names its expressions read are checked with the
// conditions'.
func (d *planDecoder) template(n *yaml.Node, field, src string) {
	if !planspec.HasTemplate(src) {
		return
	}
	t, err := CompileTemplate(src)
	if err != nil {
		d.exprError(n, field, err, "template")
		return
	}
	for _, part := range t.parts {
		d.noteItemUse(n, field, part.expr)
	}
	if c := t.names(); c.namesAny() {
		d.refs = append(d.refs, stepRef{node: n, field: field, key: lastKey(field), cond: c, tpl: t})
	}
}

// checkRefs reports conditions and templates that name steps, vars, params or
// totals the plan does not have.
func (d *planDecoder) checkRefs(ids map[string]int, vars map[string]any, params []string) {
	known := make([]string, 0, len(ids))
	for id := range ids {
		known = append(known, id)
	}
	slices.Sort(known)
	for _, r := range d.refs {
		for _, name := range r.cond.vars {
			if msg := undeclaredVar(name, vars); msg != "" {
				d.fail(r.node, r.field, "%s: %s", r.key, msg)
			}
		}
		for _, name := range r.cond.params {
			if slices.Contains(params, name) {
				continue
			}
			msg := fmt.Sprintf("%s: no param %q: the plan's params do not declare it (params: {%s: {type: string}})", r.key, name, name)
			if s := planspec.Suggest(name, params); s != "" {
				msg = fmt.Sprintf("%s: no param %q: did you mean %q?", r.key, name, s)
			}
			d.fail(r.node, r.field, "%s", msg)
		}
		for _, id := range r.cond.steps {
			if _, ok := ids[id]; ok {
				continue
			}
			msg := fmt.Sprintf("%s: no step %q in this plan", r.key, id)
			if s := planspec.Suggest(id, known); s != "" {
				msg += fmt.Sprintf(": did you mean %q?", s)
			}
			d.fail(r.node, r.field, "%s", msg)
		}
		d.checkTotalRefs(r)
	}
}

// undeclaredVar says why vars.name names nothing; "" when the plan declares it. A
// typo would otherwise read as nil when the step comes up, and the condition fail
// there, at run time, on every event.
func undeclaredVar(name string, vars map[string]any) string {
	if _, ok := vars[name]; ok {
		return ""
	}
	if len(vars) == 0 {
		return fmt.Sprintf("no var %q: the plan declares no vars (vars: {%s: ...})", name, name)
	}
	msg := fmt.Sprintf("no var %q in the plan's vars", name)
	if s := planspec.Suggest(name, slices.Sorted(maps.Keys(vars))); s != "" {
		msg += fmt.Sprintf(": did you mean %q?", s)
	}
	return msg
}

// abort reads a step's abort: a condition, or {when: condition, reason:
// template}, the reason the blocker's text when it holds.
func (d *planDecoder) abort(sp *planspec.StepSpec, v *yaml.Node, f string) {
	if v.Kind != yaml.MappingNode {
		sp.Abort = d.condition(v, f)
		return
	}
	d.fields(v, f, func(key, kf string, k, kv *yaml.Node) {
		switch key {
		case "when":
			sp.Abort = d.condition(kv, kf)
		case "reason":
			sp.AbortReason = d.text(kv, kf, `why the plan stops, like "the review found ${result.findings_total} blockers"`)
			d.template(kv, kf, sp.AbortReason)
		default:
			d.fail(k, kf, "unknown key %q in abort: want when (the condition) and reason (the blocker's text)", key)
		}
	})
	if sp.Abort == "" {
		d.fail(v, f, "abort: a mapping needs when: the condition that stops the plan")
	}
}
