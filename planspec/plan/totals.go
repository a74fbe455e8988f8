package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/checker"
	"github.com/expr-lang/expr/compiler"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/types"
	"github.com/expr-lang/expr/vm"
	"github.com/stepseq/stepseq/planspec"
	"gopkg.in/yaml.v3"
)

// A group's running totals (totals: {NAME: EXPR}): EXPR reads one finished
// round as an element of rounds does, each of the group's steps by id
// (respond.result.fixed_count; an id with "-" or "." as $env["fix-it"]), and
// every member access in it is nil-safe, so that a step skipped in a round
// adds nothing rather than failing. Conditions, templates and the summary
// read the totals as totals.NAME, typed by their kind.

// totalDecl is a total the plan declares, for the names expressions read.
type totalDecl struct {
	group string
	line  int
}

// totals reads a group's totals once its steps are known: a mapping of names
// to an expression (a sum), {sum: EXPR}, {count: EXPR} or {list: EXPR}, each
// type-checked against the group's steps and their result schemas.
func (d *planDecoder) totals(n *yaml.Node, field string, g *planspec.Group, steps []PlanStep) map[string]planspec.Total {
	if n.Kind != yaml.MappingNode {
		d.fail(n, field, "totals: want a mapping of names to expressions over a round, like {fixed: \"respond.result.fixed_count\"}, got %s", describeNode(n))
		return nil
	}
	env := roundTypes(g.Steps, func(id string) json.RawMessage {
		for _, s := range steps {
			if s.ID == id {
				return s.Spec.Result
			}
		}
		return nil
	})
	out := map[string]planspec.Total{}
	d.pairs(n, field, func(name string, k, v *yaml.Node) {
		f := field + "." + name
		if err := planspec.CheckTotalName(name); err != nil {
			d.fail(k, f, "%v", err)
			return
		}
		if prev, dup := d.totalDecls[name]; dup {
			d.fail(k, f, "total %q: group %q declares it at line %d; a total's name is the plan's (totals.%s): give this one another", name, prev.group, prev.line, name)
			return
		}
		t, src, ok := d.total(v, f)
		if !ok {
			return
		}
		kind, _ := t.Kind()
		d.declareTotal(name, g.ID, k.Line, kind)
		if _, err := compileTotal(kind, src.Value, env); err != nil {
			d.exprError(src, f, err, "expression")
			return
		}
		if kind == planspec.TotalList && literalMax(g) > planspec.MaxTotalList {
			d.fail(k, f, "total %q: a list keeps one value a round, at most %d, and this loop may run %s rounds: count or sum them instead ({count: EXPR}), or lower repeat.max",
				name, planspec.MaxTotalList, g.Max)
			return
		}
		out[name] = t
	})
	return out
}

// total reads one total: an expression (a sum), or a mapping of one kind to
// its expression. It returns the expression's node, for errors.
func (d *planDecoder) total(n *yaml.Node, field string) (planspec.Total, *yaml.Node, bool) {
	var t planspec.Total
	if n.Kind == yaml.ScalarNode {
		src, ok := d.str(n, field)
		t.Sum = src
		return t, n, ok && src != ""
	}
	const want = `want an expression over a round (its sum), or {count: EXPR} or {list: EXPR}, like "respond.result.fixed_count"`
	if n.Kind != yaml.MappingNode || len(n.Content) != 2 {
		d.fail(n, field, "%s: %s, got %s", lastKey(field), want, describeNode(n))
		return t, nil, false
	}
	k, v := n.Content[0], n.Content[1]
	src, ok := d.str(v, field+"."+k.Value)
	switch {
	case !ok:
		return t, nil, false
	case k.Value == planspec.TotalSum:
		t.Sum = src
	case k.Value == planspec.TotalCount:
		t.Count = src
	case k.Value == planspec.TotalList:
		t.List = src
	default:
		d.fail(k, field+"."+k.Value, "%s: unknown kind %q: %s", lastKey(field), planspec.Clip(k.Value, 40), want)
		return t, nil, false
	}
	return t, v, src != ""
}

func (d *planDecoder) declareTotal(name, group string, line int, kind string) {
	if d.totalDecls == nil {
		d.totalDecls, d.totalTypes = map[string]totalDecl{}, types.Map{}
	}
	d.totalDecls[name] = totalDecl{group: group, line: line}
	d.totalTypes[name] = totalType(kind)
}

// totalType is what totals.NAME gives: a sum is a number, a count a whole
// number, a list a list.
func totalType(kind string) types.Type {
	switch kind {
	case planspec.TotalCount:
		return types.Int
	case planspec.TotalList:
		return types.Array(types.Any)
	}
	return types.Float64
}

// literalMax is the group's max when it is a number; 0 for an expression.
func literalMax(g *planspec.Group) int {
	var n int
	if _, err := fmt.Sscanf(g.Max, "%d", &n); err != nil || fmt.Sprint(n) != strings.TrimSpace(g.Max) {
		return 0
	}
	return n
}

// checkTotalRefs reports totals.NAME that no group declares.
func (d *planDecoder) checkTotalRefs(r stepRef) {
	names := slices.Sorted(maps.Keys(d.totalDecls))
	for _, name := range r.cond.totals {
		if _, ok := d.totalDecls[name]; ok {
			continue
		}
		msg := fmt.Sprintf("%s: no total %q: no loop of the plan declares it (totals: {%s: \"STEP.result.FIELD\"} beside its repeat)", r.key, name, name)
		if s := planspec.Suggest(name, names); s != "" {
			msg = fmt.Sprintf("%s: no total %q: did you mean %q?", r.key, name, s)
		}
		d.fail(r.node, r.field, "%s", msg)
	}
}

// roundTypes is what a total's expression reads: each of the group's steps
// by id, as a round keeps its record, its result typed by its schema.
func roundTypes(steps []string, schema func(id string) json.RawMessage) types.Map {
	env := types.Map{}
	for _, id := range steps {
		result := types.Type(types.Any)
		if s := schema(id); len(s) > 0 {
			result = ParamType(s)
		}
		env[id] = types.Map{"status": types.String, "tries": types.Int, "lastRunIso": types.String,
			"skipped": types.Bool, "error": types.String, "result": result}
	}
	return env
}

// compileTotal compiles a total's expression against env (roundTypes), and
// refuses one whose type its kind cannot keep: a sum adds numbers, a count
// counts the rounds where it holds, a list keeps one plain value a round.
func compileTotal(kind, src string, env types.Map) (prog *vm.Program, err error) {
	if strings.TrimSpace(src) == "" || len(src) > MaxConditionLen {
		return nil, &ConditionError{Source: src, Msg: fmt.Sprintf("want an expression of at most %d bytes over a round, like respond.result.fixed_count", MaxConditionLen)}
	}
	cfg := conf.CreateNew()
	for _, opt := range []expr.Option{expr.Env(env), expr.MaxNodes(maxConditionNodes), expr.Patch(nilSafe{})} {
		opt(cfg)
	}
	defer func() {
		if r := recover(); r != nil {
			prog, err = nil, &ConditionError{Source: src, Msg: fmt.Sprintf("cannot compile: %v", r)}
		}
	}()
	tree, err := checker.ParseCheck(src, cfg)
	if err != nil {
		return nil, totalError(src, err, env)
	}
	if msg := kindRefuses(kind, tree.Node.Type()); msg != "" {
		return nil, &ConditionError{Source: src, Msg: msg}
	}
	prog, err = compiler.Compile(tree, cfg)
	if err != nil {
		return nil, compileError(src, err)
	}
	return prog, nil
}

// kindRefuses says why a total of kind cannot keep what an expression of
// type t gives; "" when it can. An expression of unknown type is judged
// round by round.
func kindRefuses(kind string, t reflect.Type) string {
	if t == nil || t.Kind() == reflect.Interface {
		return ""
	}
	got := typeNames.Replace(t.String())
	switch k := t.Kind(); kind {
	case planspec.TotalSum:
		if !isNumberKind(k) {
			return fmt.Sprintf("gives %s, want a number to add up: count the rounds where it holds with {count: EXPR}, or keep it with {list: EXPR}", got)
		}
	case planspec.TotalCount:
		if k != reflect.Bool {
			return fmt.Sprintf("gives %s, want true or false: {count: EXPR} counts the rounds where it holds, like {count: \"review.result.findings_total > 0\"}", got)
		}
	case planspec.TotalList:
		if k != reflect.Bool && k != reflect.String && !isNumberKind(k) {
			return fmt.Sprintf("gives %s, want one plain value a round (a string, a number, true or false): name one field, like review.result.doc_path", got)
		}
	}
	return ""
}

func isNumberKind(k reflect.Kind) bool {
	return k >= reflect.Int && k <= reflect.Float64
}

// totalError is a compile error of a total, an unknown name told as the
// group's step ids it may read.
func totalError(src string, err error, env types.Map) error {
	var fe *file.Error
	if errors.As(err, &fe) {
		if name, ok := strings.CutPrefix(fe.Message, "unknown name "); ok {
			ids := slices.Sorted(maps.Keys(env))
			ce := compileError(src, err).(*ConditionError)
			ce.Msg = fmt.Sprintf("unknown name %q: a total reads the round's steps by id (%s); an id with \"-\" or \".\" as $env[\"ID\"]", name, strings.Join(ids, ", "))
			if s := planspec.Suggest(name, ids); s != "" {
				ce.Msg = fmt.Sprintf("unknown name %q: did you mean %q? A total reads the round's steps by id", name, s)
			}
			return ce
		}
	}
	return compileError(src, err)
}

// nilSafe makes every member access of a total's expression nil-safe, as if
// written with ?.: a step skipped in a round, or a field it did not give,
// reads as nil.
type nilSafe struct{}

func (nilSafe) Visit(node *ast.Node) {
	m, ok := (*node).(*ast.MemberNode)
	if !ok || m.Optional {
		return
	}
	m.Optional = true
	ast.Patch(node, &ast.ChainNode{Node: m})
}

// KeepTotals adds the round g's loop l just finished (its last kept round)
// to the group's running totals, after taking back replaced: the record of
// an earlier run of the same round, which a re-run ran again (nil when the
// round is new). A total whose expression fails, or gives what its kind
// cannot keep, becomes the "error: round N: …" that says why, and stays so:
// a total that missed a round is no longer exact.
func KeepTotals(g *planspec.Group, l *planspec.Loop, replaced planspec.RoundRecord) {
	if len(g.Totals) == 0 || len(l.Rounds) == 0 {
		return
	}
	// Results read untyped, as conditions' do when they run: their schemas
	// typed the check, when the plan was read; a JSON number is a float.
	env := roundTypes(g.Steps, func(string) json.RawMessage { return nil })
	round := roundEnv(l.Rounds[len(l.Rounds)-1])
	var earlier map[string]any
	if replaced != nil {
		earlier = roundEnv(replaced)
	}
	if l.Totals == nil {
		l.Totals = map[string]any{}
	}
	for _, name := range slices.Sorted(maps.Keys(g.Totals)) {
		t := g.Totals[name]
		cur, ok := l.Totals[name]
		if !ok {
			cur = t.Zero()
		}
		if s, failed := cur.(string); failed && strings.HasPrefix(s, "error: ") {
			continue
		}
		next, err := addRound(t, cur, env, round, earlier)
		if err != nil {
			next = fmt.Sprintf("error: round %d: %v", l.Round, err)
		}
		l.Totals[name] = next
	}
}

// roundEnv is a kept round as a total's expression reads it.
func roundEnv(rec planspec.RoundRecord) map[string]any {
	out := make(map[string]any, len(rec))
	for id, rr := range rec {
		var result any
		if len(rr.Result) > 0 {
			_ = json.Unmarshal(rr.Result, &result) // valid JSON: it passed its schema
		}
		out[id] = map[string]any{"status": rr.Status, "tries": rr.Tries, "lastRunIso": rr.LastRunIso,
			"skipped": rr.Skipped, "error": rr.Error, "result": result}
	}
	return out
}

// addRound is total t, cur so far, with round added and earlier (the same
// round's earlier run; nil when none) taken back.
func addRound(t planspec.Total, cur any, env types.Map, round, earlier map[string]any) (any, error) {
	kind, src := t.Kind()
	prog, err := compileTotal(kind, src, env)
	if err != nil {
		return nil, err
	}
	if earlier != nil {
		old, err := roundValue(prog, kind, src, earlier)
		if err == nil {
			cur, err = combine(kind, cur, old, -1)
		}
		if err != nil {
			return nil, err
		}
	}
	v, err := roundValue(prog, kind, src, round)
	if err != nil {
		return nil, err
	}
	return combine(kind, cur, v, 1)
}

// roundValue is what a round gives a total of kind: for a sum a number, or
// nil, which adds nothing; for a count 1 or 0; for a list one plain value.
func roundValue(prog *vm.Program, kind, src string, round map[string]any) (any, error) {
	var m vm.VM
	m.MemoryBudget = conditionMemoryBudget
	v, err := m.Run(prog, round)
	if err != nil {
		return nil, runtimeError(src, err)
	}
	what := planspec.Clip(src, 60)
	switch kind {
	case planspec.TotalCount:
		if b, ok := v.(bool); ok && b {
			return 1, nil
		} else if !ok && v != nil {
			return nil, fmt.Errorf("%s gave %s, want true or false", what, describeValue(v))
		}
		return 0, nil
	case planspec.TotalList:
		switch x := v.(type) {
		case nil, bool:
			return v, nil
		case string:
			if len(x) > planspec.MaxTotalText {
				return nil, fmt.Errorf("%s gave a string of %d bytes: a list keeps values of at most %d, one field a round", what, len(x), planspec.MaxTotalText)
			}
			return v, nil
		}
		if n, ok := number(v); ok {
			return n, nil
		}
		return nil, fmt.Errorf("%s gave %s, want one plain value (a string, a number, true or false)", what, describeValue(v))
	}
	if v == nil {
		return nil, nil
	}
	if n, ok := number(v); ok {
		return n, nil
	}
	return nil, fmt.Errorf("%s gave %s, want a number to add up", what, describeValue(v))
}

// combine is cur with v added, or with sign -1 taken back.
func combine(kind string, cur, v any, sign int) (any, error) {
	switch kind {
	case planspec.TotalList:
		list, ok := cur.([]any)
		switch {
		case !ok:
			return nil, fmt.Errorf("the list kept is %s, not a list", describeValue(cur))
		case sign < 0 && len(list) > 0:
			return slices.Clone(list[:len(list)-1]), nil // the latest round's is the last value
		case sign < 0:
			return list, nil
		case len(list) >= planspec.MaxTotalList:
			return nil, fmt.Errorf("a list total keeps at most %d values, one a round: count or sum them instead", planspec.MaxTotalList)
		}
		return append(list, v), nil
	case planspec.TotalCount:
		n, ok := number(cur)
		if !ok {
			return nil, fmt.Errorf("the count kept is %s, not a number", describeValue(cur))
		}
		return int(n) + sign*v.(int), nil
	}
	sum, ok := number(cur)
	if !ok {
		return nil, fmt.Errorf("the sum kept is %s, not a number", describeValue(cur))
	}
	if v == nil {
		return sum, nil
	}
	return sum + float64(sign)*v.(float64), nil
}

// number is v as a float, when it is a number.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}
