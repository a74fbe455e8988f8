package mcp

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// TestDecodeArgs: arguments are decoded when the input schema holds them, and
// refused otherwise with every problem in words, each at its place.
func TestDecodeArgs(t *testing.T) {
	type item struct {
		Name string `json:"name"`
	}
	type input struct {
		ID    string   `json:"id" jsonschema:"the id"`
		N     int      `json:"n,omitempty"`
		Tags  []string `json:"tags,omitempty"`
		Items []item   `json:"items,omitempty"`
		Value any      `json:"value,omitempty"`
	}
	in := schemaFor[input](true)
	check, err := compileInput(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, args string
		want       []string // nil: accepted
	}{
		{"accepted", `{"id": "a", "n": 2, "tags": ["x"], "items": [{"name": "i"}], "value": [1]}`, nil},
		{"no arguments", `null`, []string{"arguments.id: missing (the id)"}},
		{"not an object", `[1]`, []string{"arguments: an array; want an object"}},
		{"not JSON", `{`, []string{"arguments: not JSON: unexpected end of JSON input"}},
		{"nulls", `{"id": null, "tags": [null], "value": null}`, []string{
			"arguments.id: null; want a string (leave it out rather than send null)",
			"arguments.tags[0]: null; want a string",
			"arguments.value: null; want an object or an array or a string or a number or a boolean (leave it out rather than send null)"}},
		{"deep", `{"id": "a", "items": [{"name": "i"}, {"name": 3, "x": 1}]}`, []string{
			"arguments.items[1].x: unknown; it takes name", "arguments.items[1].name: the number 3; want a string"}},
		{"a fraction", `{"id": "a", "n": 1.5}`, []string{"arguments.n: the number 1.5; want an integer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got input
			r := decodeArgs(json.RawMessage(tc.args), in, check, &got)
			switch {
			case tc.want == nil && r != nil:
				t.Errorf("refused: %q", r.Reasons)
			case tc.want == nil && (got.ID != "a" || got.N != 2 || len(got.Items) != 1):
				t.Errorf("decoded as %+v", got)
			case tc.want != nil && (r == nil || r.Code != InvalidParams || !slices.Equal(r.Reasons, tc.want)):
				t.Errorf("got %+v\nwant %q", r, tc.want)
			}
		})
	}
}

// TestDecodeArgs_OtherKeywords: a keyword beyond types, required and unknown
// fields is told in the validator's words, at its place, a null called null.
func TestDecodeArgs_OtherKeywords(t *testing.T) {
	one := 1.0
	in := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{
		"n":    {Type: "integer", Minimum: &one},
		"mode": {Enum: []any{"a", "b"}},
	}}
	check, err := compileInput(in)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	r := decodeArgs(json.RawMessage(`{"n": 0, "mode": null}`), in, check, &v)
	if r == nil || len(r.Reasons) != 2 || r.Reasons[0] != "arguments.mode: enum: null does not equal any of: [a b]" ||
		!strings.HasPrefix(r.Reasons[1], "arguments.n: minimum: ") {
		t.Errorf("got %+v; want the enum's and the minimum's, at their places", r)
	}
}
