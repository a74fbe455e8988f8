package plan

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/checker"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/types"
)

// Expressions read params.NAME typed from the param's JSON Schema:
// a string param is a string, an integer an int, an object a map of its
// properties, so that params.count + "x" on an integer param is a located
// validate error, as a typo in a step id is. Expressions are compiled once for
// every plan against an untyped params (the compiled-condition cache is shared
// by plans); those that name a param are checked a second time, per plan,
// against its params' types. Only the check is typed: the bytecode stays the
// shared one.

// ParamType is the expression type of a param's schema: its `type` (string,
// integer, number, boolean, null, array with its items, object with its
// properties, closed when additionalProperties is false); any for a schema
// that names no single type.
func ParamType(schema json.RawMessage) types.Type {
	var m map[string]any
	if json.Unmarshal(schema, &m) != nil {
		return types.Any
	}
	return schemaType(m, 0)
}

func schemaType(m map[string]any, depth int) types.Type {
	if depth > 16 {
		return types.Any
	}
	t, _ := m["type"].(string)
	switch t {
	case "string":
		return types.String
	case "integer":
		return types.Int
	case "number":
		return types.Float64
	case "boolean":
		return types.Bool
	case "array":
		if items, ok := m["items"].(map[string]any); ok {
			return types.Array(schemaType(items, depth+1))
		}
		return types.Array(types.Any)
	case "object":
		props, _ := m["properties"].(map[string]any)
		if len(props) == 0 {
			return types.Any // map[string]any: every key reads
		}
		out := types.Map{}
		for name, p := range props {
			if ps, ok := p.(map[string]any); ok {
				out[name] = schemaType(ps, depth+1)
			} else {
				out[name] = types.Any
			}
		}
		if ap, ok := m["additionalProperties"].(bool); !ok || ap {
			out[types.Extra] = types.Any
		}
		return out
	}
	return types.Any
}

// evaluationTypes is the condition language's environment as types: the
// fields of evaluation by their expr names.
var evaluationTypes = sync.OnceValue(func() types.Map {
	out := types.Map{}
	t := reflect.TypeFor[evaluation]()
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("expr")
		if !f.IsExported() || name == "" {
			continue
		}
		if f.Type.Kind() == reflect.Interface {
			out[name] = types.Any // a nil interface would read as the type nil
			continue
		}
		out[name] = types.TypeOf(reflect.Zero(f.Type).Interface())
	}
	return out
})

// paramTypeChecker checks the expressions of one plan that name its params,
// each source once.
type paramTypeChecker struct {
	cfg     [2]*conf.Config // condition, value
	checked map[[2]string]error
}

// totalsTyped is also with totals typed as the plan's groups declare them.
// A name no group declares reads as any: checkRefs reports it, once.
func (d *planDecoder) totalsTyped(also types.Map) types.Map {
	if len(d.totalTypes) == 0 {
		return also
	}
	ts := types.Map{types.Extra: types.Any}
	for k, v := range d.totalTypes {
		ts[k] = v
	}
	out := types.Map{"totals": ts}
	for k, v := range also {
		out[k] = v
	}
	return out
}

// newTypeChecker checks expressions with the params typed from their schemas
// and the names of also typed as it says (result, for exit and abort).
func newTypeChecker(params []Param, also types.Map) *paramTypeChecker {
	ps := types.Map{}
	for _, p := range params {
		ps[p.Name] = ParamType(p.Schema)
	}
	if len(params) == 0 {
		ps[types.Extra] = types.Any
	}
	env := types.Map{}
	for k, v := range evaluationTypes() {
		env[k] = v
	}
	env["params"] = ps
	for k, v := range also {
		env[k] = v
	}
	pc := &paramTypeChecker{checked: map[[2]string]error{}}
	for i, value := range []bool{false, true} {
		cfg := conf.CreateNew()
		opts := []expr.Option{expr.Env(env), expr.MaxNodes(maxConditionNodes), expr.Patch(lenOfGlob{})}
		if !value {
			opts = append(opts, expr.AsBool())
		}
		for _, opt := range opts {
			opt(cfg)
		}
		pc.cfg[i] = cfg
	}
	return pc
}

// check type-checks one expression; nil when it holds. An unknown name is
// left to the untyped compilation, which has judged it already.
func (pc *paramTypeChecker) check(src string, value bool) (err error) {
	k := [2]string{src, "c"}
	if value {
		k[1] = "v"
	}
	if err, ok := pc.checked[k]; ok {
		return err
	}
	cfg := pc.cfg[0]
	if value {
		cfg = pc.cfg[1]
	}
	defer func() {
		if r := recover(); r != nil {
			err = nil // the untyped compilation accepted it: a checker panic is not the plan's fault
		}
		pc.checked[k] = err
	}()
	if _, err := checker.ParseCheck(src, cfg); err != nil {
		ce := compileError(src, err)
		if c, ok := ce.(*ConditionError); ok && strings.HasPrefix(c.Msg, "unknown name ") {
			return nil
		}
		return ce
	}
	return nil
}

// checkParamTypes checks, against the types of the params and the running
// totals, each expression of the plan that names only params and totals the
// plan declares (an undeclared one is an error of its own).
func (d *planDecoder) checkParamTypes(params []Param) {
	if len(params) == 0 && len(d.totalTypes) == 0 {
		return
	}
	declared := make([]string, len(params))
	for i, p := range params {
		declared[i] = p.Name
	}
	typed := func(c *Condition) bool {
		return len(c.params)+len(c.totals) > 0 &&
			!slices.ContainsFunc(c.params, func(n string) bool { return !slices.Contains(declared, n) }) &&
			!slices.ContainsFunc(c.totals, func(n string) bool { _, ok := d.totalDecls[n]; return !ok })
	}
	var pc *paramTypeChecker
	for _, r := range d.refs {
		if !typed(r.cond) {
			continue
		}
		if pc == nil {
			pc = newTypeChecker(params, d.totalsTyped(nil))
		}
		if r.tpl == nil {
			if err := pc.check(r.cond.src, r.cond.value); err != nil {
				d.exprError(r.node, r.field, err, "expression")
			}
			continue
		}
		for _, p := range r.tpl.parts {
			if p.expr == nil || len(p.expr.params)+len(p.expr.totals) == 0 {
				continue
			}
			if err := pc.check(p.expr.src, true); err != nil {
				d.exprError(r.node, r.field, locateIn(r.tpl.src, p.off, err), "template")
				break
			}
		}
	}
}

// checkResultTypes checks each exit and abort of a step with a result schema
// against the result's type, as params are checked against theirs:
// result.findings_total + 1 as an exit, on an integer findings_total, is a
// located error, not a condition that never holds.
func (d *planDecoder) checkResultTypes(params []Param) {
	if len(d.results) == 0 {
		return
	}
	checkers := map[string]*paramTypeChecker{}
	for _, pc := range d.conds {
		key := lastKey(pc.field)
		if key != "exit" && key != "abort" && key != "when" {
			continue
		}
		step := strings.TrimSuffix(pc.field, "."+key)
		if key == "when" { // abort: {when, reason}; a step's own when is a gate
			var ok bool
			if step, ok = strings.CutSuffix(step, ".abort"); !ok {
				continue
			}
		}
		schema, ok := d.results[step]
		if !ok {
			continue
		}
		tc := checkers[step]
		if tc == nil {
			tc = newTypeChecker(params, d.totalsTyped(types.Map{"result": ParamType(schema)}))
			checkers[step] = tc
		}
		if err := tc.check(pc.src, false); err != nil {
			d.conditionError(pc.node, pc.field, err)
		}
	}
}
