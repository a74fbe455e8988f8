package resultschema

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestSchema_EveryViolation: a result is told every violation with its
// path, down properties, additionalProperties, prefixItems, items and through
// $defs, in the order of the paths; a schema whose references need the whole
// (here "#") still refuses what it must, at "/".
func TestSchema_EveryViolation(t *testing.T) {
	const schema = `{
		"type": "object", "required": ["name", "pages", "tags"], "additionalProperties": {"type": "integer"},
		"$defs": {"page": {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer", "minimum": 1}}}},
		"properties": {
			"name": {"type": "string", "minLength": 3},
			"pages": {"type": "array", "items": {"$ref": "#/$defs/page"}, "maxItems": 3},
			"pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}]},
			"tags": {"type": "array", "items": {"enum": ["a", "b"]}}
		}}`
	rs, err := Compile(json.RawMessage(schema))
	if err != nil {
		t.Fatal(err)
	}
	if errs := rs.Validate(json.RawMessage(`{"name":"abc","pages":[{"n":1}],"tags":["a"],"extra":4,"pair":["x",2]}`)); errs != nil {
		t.Fatalf("valid result refused: %q", errs)
	}
	errs := rs.Validate(json.RawMessage(`{"name":"ab","pages":[{"n":0},{},{"n":2},{"n":3}],"extra":"x","pair":[1,"y"],"a/b":1.5}`))
	want := []string{"/: required", "/a~1b: type", "/extra: type", "/name: minLength", "/pages: maxItems",
		"/pages/0/n: minimum", "/pages/1: required", "/pair/0: type", "/pair/1: type"}
	if len(errs) != len(want) {
		t.Fatalf("got %d violations, want %d:\n%s", len(errs), len(want), strings.Join(errs, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(errs[i], w) {
			t.Errorf("violation %d = %q, want it to start %q", i, errs[i], w)
		}
		if strings.Contains(errs[i], "validating ") {
			t.Errorf("violation %d = %q names schema locations", i, errs[i])
		}
	}

	// A null is called null, not by the Go value the library holds.
	if errs := rs.Validate(json.RawMessage(`{"name":null,"pages":[],"tags":[]}`)); len(errs) != 1 || errs[0] != `/name: type: null has type "null", want "string"` {
		t.Errorf("a null name: %q", errs)
	}

	// A node broken two ways is told both, each with its keyword.
	closed, err := Compile(json.RawMessage(`{"type":"object","required":["a"],"properties":{"a":{}},"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	var kws []string
	for _, v := range closed.Violations(map[string]any{"b": 1.0}) {
		kws = append(kws, v.Keyword)
	}
	if !slices.Equal(kws, []string{"additionalProperties", "required"}) {
		t.Errorf("a missing and an unknown field: keywords %q, want additionalProperties and required", kws)
	}

	tree, err := Compile(json.RawMessage(`{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#"}}},"required":["id"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if errs := tree.Validate(json.RawMessage(`{"id":1,"kids":[{"id":2,"kids":[]}]}`)); errs != nil {
		t.Errorf("valid tree refused: %q", errs)
	}
	if errs := tree.Validate(json.RawMessage(`{"id":1,"kids":[{"kids":[]}]}`)); len(errs) != 1 || !strings.HasPrefix(errs[0], "/: ") || !strings.Contains(errs[0], "missing properties") {
		t.Errorf("tree missing a nested id: %q", errs)
	}
}

// TestCompile_Refuses: what the library itself lets through — a
// type that is no JSON type, a reference leaving the schema, a $schema it does
// not validate — is refused when the schema is compiled.
func TestCompile_Refuses(t *testing.T) {
	for _, tc := range []struct{ schema, want string }{
		{`{"properties":{"a":{"type":"strin"}}}`, `/properties/a/type: strin is not a JSON type`},
		{`{"type":["string",3]}`, `/type: 3 is not a JSON type`},
		{`{"items":{"$ref":"https://example.com/s.json"}}`, `/items/$ref "https://example.com/s.json": a result schema may only refer to itself`},
		{`{"$schema":"http://json-schema.org/draft-04/schema#"}`, `$schema "http://json-schema.org/draft-04/schema#": want draft 2020-12`},
		{`{"minimum":"3"}`, `minimum`},
		{`{"$ref":"#/$defs/none"}`, `none`},
		{`[1]`, `want a JSON Schema object`},
	} {
		if _, err := Compile(json.RawMessage(tc.schema)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.schema, err, tc.want)
		}
	}
}
