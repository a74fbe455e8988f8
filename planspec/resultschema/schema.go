package resultschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
)

// Schema is a compiled result schema.
//
// It is checked with the JSON Schema library the MCP SDK links
// (github.com/google/jsonschema-go), so that the binary holds one. That library
// stops at a value's first violation; so that a worker is told every violation
// with its path, the schema is also kept as a tree of nodes down its properties,
// additionalProperties, prefixItems and items, each node compiled with its own
// keywords and its children's schemas emptied. A value is valid when the whole
// schema holds it; when it does not, every node of the tree that the value
// reaches reports its own violations at the value's path: a node that fails is
// checked again keyword by keyword, so that a missing field and an unknown one
// are both told.
//
// The MCP tools' arguments are checked with it too: what a schema accepts is
// decided here, for results, params and arguments alike.
type Schema struct {
	whole *jsonschema.Resolved
	tree  *resultNode // nil when a reference needs the whole schema around it
}

// resultNode is one schema of a result schema's tree: its own keywords, and the
// nodes of the values under it.
type resultNode struct {
	own        *jsonschema.Resolved
	parts      func() []*jsonschema.Resolved // own, a keyword (or a few that go together) each; compiled when own first fails
	props      map[string]*resultNode
	additional *resultNode // additionalProperties when a schema and there are no patternProperties
	prefix     []*resultNode
	items      *resultNode
}

var resultSchemas sync.Map // string(raw) → *Schema

// jsonTypes are the words of `type`.
var jsonTypes = []string{"null", "boolean", "object", "array", "number", "integer", "string"}

// schemaVersions are the `$schema` values the library validates; none is 2020-12.
var schemaVersions = []string{
	"https://json-schema.org/draft/2020-12/schema",
	"http://json-schema.org/draft-07/schema#",
	"https://json-schema.org/draft-07/schema#",
}

// Compile compiles a result schema given as JSON. Schemas already
// compiled are not compiled again. A reference may only point inside the schema
// (a plan's schema must not read files or the network).
func Compile(raw json.RawMessage) (*Schema, error) {
	if c, ok := resultSchemas.Load(string(raw)); ok {
		return c.(*Schema), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // the schema's numbers are compiled as written
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	switch doc.(type) {
	case map[string]any, bool:
	default:
		return nil, fmt.Errorf("want a JSON Schema object, like {type: object, required: [url]}")
	}
	if m, ok := doc.(map[string]any); ok {
		if v, ok := m["$schema"].(string); ok && !slices.Contains(schemaVersions, v) {
			return nil, fmt.Errorf("$schema %q: want draft 2020-12 (%s) or draft-07", v, schemaVersions[0])
		}
	}
	local := true
	if err := checkSchema(doc, "", &local); err != nil {
		return nil, err
	}
	whole, err := resolveSchema(doc)
	if err != nil {
		return nil, err
	}
	rs := &Schema{whole: whole}
	if local {
		m, _ := doc.(map[string]any)
		defs := map[string]any{}
		for _, k := range []string{"$defs", "definitions"} {
			if d, ok := m[k]; ok {
				defs[k] = d
			}
		}
		// The whole compiled, so does each node: its references are to $defs,
		// which every node carries.
		if rs.tree, err = compileNode(doc, defs, true, nil); err != nil {
			return nil, err
		}
	}
	got, _ := resultSchemas.LoadOrStore(string(raw), rs)
	return got.(*Schema), nil
}

// Subschema keywords, by the shape of their value.
var (
	schemaKeys = []string{"additionalProperties", "not", "if", "then", "else", "contains",
		"propertyNames", "unevaluatedItems", "unevaluatedProperties", "additionalItems", "items"}
	schemaListKeys = []string{"allOf", "anyOf", "oneOf", "prefixItems", "items"}
	schemaMapKeys  = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)

// checkSchema checks what the library leaves unchecked in the schema at at (a
// JSON pointer) and under it: `type` names JSON types and `$ref` stays inside the
// schema. local is cleared when a reference needs the whole schema around its
// node (one outside $defs, an $id, $anchor or dynamic reference).
func checkSchema(s any, at string, local *bool) error {
	m, ok := s.(map[string]any)
	if !ok {
		return nil
	}
	if err := checkType(m["type"], at); err != nil {
		return err
	}
	if ref, ok := m["$ref"].(string); ok {
		if !strings.HasPrefix(ref, "#") {
			return fmt.Errorf("%s/$ref %q: a result schema may only refer to itself ($ref to #/$defs/…)", at, ref)
		}
		if !strings.HasPrefix(ref, "#/$defs/") && !strings.HasPrefix(ref, "#/definitions/") {
			*local = false
		}
	}
	for _, k := range []string{"$id", "$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef"} {
		if _, ok := m[k]; ok {
			*local = false
		}
	}
	for _, k := range schemaKeys {
		if err := checkSchema(m[k], at+"/"+k, local); err != nil {
			return err
		}
	}
	for _, k := range schemaListKeys {
		list, _ := m[k].([]any)
		for i, sub := range list {
			if err := checkSchema(sub, fmt.Sprintf("%s/%s/%d", at, k, i), local); err != nil {
				return err
			}
		}
	}
	for _, k := range schemaMapKeys {
		subs, _ := m[k].(map[string]any)
		for name, sub := range subs {
			if err := checkSchema(sub, at+"/"+k+"/"+escapePointer(name), local); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkType(t any, at string) error {
	if t == nil {
		return nil
	}
	words, ok := t.([]any)
	if !ok {
		words = []any{t}
	}
	for _, w := range words {
		if s, ok := w.(string); !ok || !slices.Contains(jsonTypes, s) {
			return fmt.Errorf("%s/type: %v is not a JSON type (%s)", at, w, strings.Join(jsonTypes, ", "))
		}
	}
	return nil
}

// resolveSchema compiles one schema document.
func resolveSchema(doc any) (*jsonschema.Resolved, error) {
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	return s.Resolve(nil)
}

// compileNode compiles schema s as a node: its own keywords, with the schemas of
// its properties, additionalProperties, prefixItems and items emptied (true) and
// compiled as its children. defs are the root's $defs, which a node below the
// root carries so that its references resolve. A schema that is only a $ref to
// one of them is compiled as that schema, so that the values under it are
// located too, unless the reference is already being followed (expanding).
func compileNode(s any, defs map[string]any, root bool, expanding []string) (*resultNode, error) {
	m, ok := s.(map[string]any)
	if !ok {
		own, err := resolveSchema(s)
		return &resultNode{own: own}, err
	}
	if ref, ok := m["$ref"].(string); ok && len(m) == 1 && !slices.Contains(expanding, ref) {
		if def := lookupDef(defs, ref); def != nil {
			return compileNode(def, defs, false, append(slices.Clip(expanding), ref))
		}
	}
	own := make(map[string]any, len(m)+len(defs))
	for k, v := range m {
		own[k] = v
	}
	if !root {
		for k, v := range defs {
			own[k] = v
		}
	}
	n := &resultNode{}
	var err error
	child := func(sub any) *resultNode {
		c, e := compileNode(sub, defs, false, expanding)
		err = errors.Join(err, e)
		return c
	}
	if props, ok := m["properties"].(map[string]any); ok {
		n.props = make(map[string]*resultNode, len(props))
		emptied := make(map[string]any, len(props))
		for name, sub := range props {
			n.props[name] = child(sub)
			emptied[name] = true
		}
		own["properties"] = emptied
	}
	if add, ok := m["additionalProperties"].(map[string]any); ok && m["patternProperties"] == nil {
		n.additional = child(add)
		own["additionalProperties"] = true
	}
	if list, ok := m["prefixItems"].([]any); ok {
		emptied := make([]any, len(list))
		for i, sub := range list {
			n.prefix = append(n.prefix, child(sub))
			emptied[i] = true
		}
		own["prefixItems"] = emptied
	}
	if items, ok := m["items"].(map[string]any); ok {
		n.items = child(items)
		own["items"] = true
	}
	if err != nil {
		return nil, err
	}
	n.own, err = resolveSchema(own)
	n.parts = sync.OnceValue(func() []*jsonschema.Resolved { return splitOwn(own) })
	return n, err
}

// Keywords that only mean something together, and those that assert nothing
// or that every part needs.
var (
	keywordGroups = [][]string{
		{"properties", "patternProperties", "additionalProperties"},
		{"prefixItems", "items", "additionalItems"},
		{"contains", "minContains", "maxContains"},
		{"if", "then", "else"},
	}
	sharedKeys   = []string{"$schema", "$defs", "definitions"}
	notAsserting = []string{"title", "description", "$comment", "examples", "default", "deprecated", "readOnly", "writeOnly",
		"contentMediaType", "contentEncoding", "contentSchema"}
)

// splitOwn compiles a node's own keywords as parts, each asserting one thing,
// so that a value is told every way it breaks the node: the library stops at
// the first. Nil when the node asserts one thing, or when its keywords cannot
// be split (unevaluated* reads every other keyword).
func splitOwn(own map[string]any) []*jsonschema.Resolved {
	if own["unevaluatedProperties"] != nil || own["unevaluatedItems"] != nil {
		return nil
	}
	var parts [][]string
	done := map[string]bool{}
	for k := range own {
		if done[k] || slices.Contains(sharedKeys, k) || slices.Contains(notAsserting, k) {
			continue
		}
		part := []string{k}
		for _, g := range keywordGroups {
			if slices.Contains(g, k) {
				part = g
			}
		}
		for _, g := range part {
			done[g] = true
		}
		parts = append(parts, part)
	}
	if len(parts) < 2 {
		return nil
	}
	slices.SortFunc(parts, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	out := make([]*jsonschema.Resolved, 0, len(parts))
	for _, part := range parts {
		doc := map[string]any{}
		for _, k := range append(slices.Clip(part), sharedKeys...) {
			if v, ok := own[k]; ok {
				doc[k] = v
			}
		}
		r, err := resolveSchema(doc)
		if err != nil {
			return nil // own compiled: its parts do; if not, own alone is told
		}
		out = append(out, r)
	}
	return out
}

// lookupDef is the schema a reference "#/$defs/name" (or "#/definitions/name")
// names, nil when it names none.
func lookupDef(defs map[string]any, ref string) any {
	for k, v := range defs {
		name, ok := strings.CutPrefix(ref, "#/"+k+"/")
		if !ok {
			continue
		}
		m, _ := v.(map[string]any)
		name = strings.ReplaceAll(strings.ReplaceAll(name, "~1", "/"), "~0", "~")
		if def, ok := m[name]; ok {
			return def
		}
	}
	return nil
}

// Validate checks a result against the schema and returns every violation as
// "<instance path>: <message>", the path "/" for the value itself. A missing
// result is one violation.
func (rs *Schema) Validate(result json.RawMessage) []string {
	if len(bytes.TrimSpace(result)) == 0 {
		return []string{"/: no result: the done report must carry a result that satisfies the step's result schema"}
	}
	var inst any
	if err := json.Unmarshal(result, &inst); err != nil {
		return []string{"/: not JSON: " + err.Error()}
	}
	vs := rs.Violations(inst)
	if vs == nil {
		return nil
	}
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = InstancePath(v.Path) + ": " + v.Msg
	}
	return out
}

// A Violation is one way a value breaks a schema.
type Violation struct {
	Path    []string // where in the value: object keys and array indexes, from the top; nil for the value itself
	Keyword string   // the keyword broken, like type, anyOf, required or additionalProperties
	Msg     string   // the library's words, without the schema locations
}

// Violations checks a decoded JSON value (what encoding/json makes of it: maps,
// slices, float64) against the schema: nil when it holds, else every violation,
// in the order of their paths.
func (rs *Schema) Violations(inst any) []Violation {
	err := rs.whole.Validate(inst)
	if err == nil {
		return nil
	}
	var out []Violation
	if rs.tree != nil {
		rs.tree.collect(inst, nil, &out)
	}
	if len(out) == 0 { // a violation only the whole sees, as through a reference
		out = []Violation{newViolation(nil, err)}
	}
	return out
}

// collect appends the violations of inst, at path, against n and its children.
func (n *resultNode) collect(inst any, path []string, out *[]Violation) {
	if err := n.own.Validate(inst); err != nil {
		told := false
		for _, p := range n.parts() {
			if err := p.Validate(inst); err != nil {
				*out = append(*out, newViolation(path, err))
				told = true
			}
		}
		if !told {
			*out = append(*out, newViolation(path, err))
		}
	}
	under := func(c *resultNode, key string, v any) {
		if c != nil {
			c.collect(v, append(slices.Clip(path), key), out)
		}
	}
	switch v := inst.(type) {
	case map[string]any:
		names := make([]string, 0, len(v))
		for name := range v {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			c, ok := n.props[name]
			if !ok {
				c = n.additional
			}
			under(c, name, v[name])
		}
	case []any:
		for i, e := range v {
			c := n.items
			if i < len(n.prefix) {
				c = n.prefix[i]
			}
			under(c, fmt.Sprint(i), e)
		}
	}
}

func newViolation(path []string, err error) Violation {
	msg := violation(err)
	kw, _, _ := strings.Cut(msg, ": ")
	switch {
	case strings.HasPrefix(msg, "unexpected additional properties"):
		kw = "additionalProperties"
	case strings.ContainsAny(kw, " \n"):
		kw = "" // not a keyword's words
	}
	return Violation{Path: path, Keyword: kw, Msg: msg}
}

// violation is the library's message without the schema locations it wraps it
// in ("validating root: validating /$defs/a: "), and with a null called null,
// where the library names the Go value it holds ("<invalid reflect.Value>").
func violation(err error) string {
	msg := err.Error()
	for strings.HasPrefix(msg, "validating ") {
		_, rest, ok := strings.Cut(msg, ": ")
		if !ok {
			break
		}
		msg = rest
	}
	return strings.ReplaceAll(msg, "<invalid reflect.Value>", "null")
}

func InstancePath(tokens []string) string {
	if len(tokens) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(escapePointer(t))
	}
	return b.String()
}

func escapePointer(t string) string {
	return strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
}
