package plan

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/stepseq/stepseq/planspec"
	"github.com/stepseq/stepseq/planspec/resultschema"
	"gopkg.in/yaml.v3"
)

// Param is one of a plan's params: a JSON Schema (draft 2020-12),
// whose default, when it has one, is the value a run that gives none takes.
type Param struct {
	Name       string
	Schema     json.RawMessage
	Default    any
	HasDefault bool
}

// ParamsError is every problem with the params a run was given, each naming its
// path (params.NAME, then the path inside the value).
type ParamsError struct {
	Problems []string
}

func (e *ParamsError) Error() string {
	return "params: " + strings.Join(e.Problems, "; ")
}

// params reads the plan's params: a mapping of name → JSON Schema. A default is
// checked against its schema.
func (d *planDecoder) params(n *yaml.Node, field string) []Param {
	if n.Kind != yaml.MappingNode {
		d.fail(n, field, "params: want a mapping of names to JSON Schemas, like {target: {type: string, default: \".\"}}, got %s", describeNode(n))
		return nil
	}
	var out []Param
	d.pairs(n, field, func(name string, k, v *yaml.Node) {
		f := field + "." + name
		if err := checkParamName(name); err != nil {
			d.fail(k, f, "params: %v", err)
			return
		}
		raw := d.resultSchema(v, f)
		if raw == nil {
			return
		}
		p := Param{Name: name, Schema: raw}
		var m map[string]any
		if json.Unmarshal(raw, &m) == nil {
			if def, ok := m["default"]; ok {
				p.Default, p.HasDefault = def, true
				rs, _ := resultschema.Compile(raw)
				b, _ := json.Marshal(def)
				for _, msg := range rs.Validate(b) {
					d.fail(v, f+".default", "params.%s: its default does not satisfy its schema: %s", name, msg)
				}
			}
		}
		out = append(out, p)
	})
	return out
}

// checkParamName: a param is read as params.NAME, so its name is an identifier.
func checkParamName(name string) error {
	for i, r := range name {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9' {
			continue
		}
		return fmt.Errorf("%q: a param's name is letters, digits and _, not starting with a digit, so that expressions read it as params.NAME", planspec.Clip(name, 40))
	}
	if name == "" {
		return fmt.Errorf("empty name")
	}
	return nil
}

// ParamNames returns the names of the plan's params, in file order.
func (p *Plan) ParamNames() []string {
	names := make([]string, len(p.Params))
	for i, pp := range p.Params {
		names[i] = pp.Name
	}
	return names
}

// ResolveParams checks the params a run is given against the plan's and returns
// the run's params: each given one, else its default. An unknown param, a
// required one (no default) not given and a value its schema refuses are each a
// problem of the *ParamsError. Values are returned as JSON reads them, whole
// numbers as ints, as the state file is read, so that a run and its
// resumption see the same types.
func (p *Plan) ResolveParams(given map[string]any) (map[string]any, error) {
	var problems []string
	out := make(map[string]any, len(p.Params))
	declared := p.ParamNames()
	for _, name := range slices.Sorted(maps.Keys(given)) {
		if slices.Contains(declared, name) {
			continue
		}
		msg := fmt.Sprintf("params.%s: unknown param", name)
		switch s := planspec.Suggest(name, declared); {
		case len(declared) == 0:
			msg += ": the plan declares no params"
		case s != "":
			msg += fmt.Sprintf(": did you mean %q?", s)
		default:
			msg += ": the plan declares " + strings.Join(declared, ", ")
		}
		problems = append(problems, msg)
	}
	for _, pp := range p.Params {
		v, ok := given[pp.Name]
		if !ok {
			if !pp.HasDefault {
				problems = append(problems, fmt.Sprintf("params.%s: required: the plan gives no default; give it (--param %s=VALUE)", pp.Name, pp.Name))
				continue
			}
			v = pp.Default
		}
		b, err := json.Marshal(v)
		if err != nil {
			problems = append(problems, fmt.Sprintf("params.%s: not a JSON value: %v", pp.Name, err))
			continue
		}
		rs, err := resultschema.Compile(pp.Schema)
		if err != nil {
			problems = append(problems, fmt.Sprintf("params.%s: %v", pp.Name, err))
			continue
		}
		var norm any
		_ = json.Unmarshal(b, &norm) // b was just marshalled
		bad := rs.Violations(norm)
		for _, vi := range bad {
			at := "" // the value itself is params.NAME
			if len(vi.Path) > 0 {
				at = resultschema.InstancePath(vi.Path)
			}
			problems = append(problems, fmt.Sprintf("params.%s%s: %s", pp.Name, at, vi.Msg))
		}
		if len(bad) == 0 {
			out[pp.Name] = planspec.WholeNumbers(norm)
		}
	}
	if len(problems) > 0 {
		return nil, &ParamsError{Problems: problems}
	}
	return out, nil
}
