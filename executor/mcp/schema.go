package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stepseq/stepseq/planspec/resultschema"
)

// Tools' schemas are inferred from their Go types, then made portable: no bare
// `true` or `false` where a schema is expected, no type arrays (a nullable
// field is anyOf a type and null), and no schema that constrains nothing (what
// the MCP Inspector's --strict reports). An input takes no null at all: a null
// argument is refused with its place named, where the SDK's own check answered
// "<invalid reflect.Value>". An output schema admits the refusal too (code and
// reasons), since clients check an error's structured content against it.

// addTool registers a tool whose handler takes In and answers Out, or refuses
// with an error that refusalOf maps to its code.
func addTool[In, Out any](s *sdk.Server, t *sdk.Tool, h func(context.Context, *sdk.CallToolRequest, In) (*sdk.CallToolResult, Out, error)) {
	in := schemaFor[In](true)
	// Compiled at the tool's first call, not when the server is made: a
	// sidecar whose door serves MCP need not hold thirteen compiled schemas
	// that no client may ever call.
	check := sync.OnceValues(func() (*resultschema.Schema, error) { return compileInput(in) })
	t.InputSchema, t.OutputSchema = in, withRefusal(schemaFor[Out](false))
	s.AddTool(t, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		rs, err := check()
		if err != nil {
			return nil, fmt.Errorf("%s: input schema: %w", t.Name, err) // a fixed type: every tool's is compiled in the tests
		}
		var args In
		if r := decodeArgs(req.Params.Arguments, in, rs, &args); r != nil {
			return refusalResult(r, nil), nil
		}
		res, out, err := h(ctx, req, args)
		if err != nil {
			var detail any
			if !reflect.ValueOf(&out).Elem().IsZero() {
				detail = out
			}
			return refusalResult(refusalOf(err), detail), nil
		}
		if res == nil {
			res = &sdk.CallToolResult{}
		}
		if res.StructuredContent == nil {
			data, err := json.Marshal(out)
			if err != nil {
				return nil, fmt.Errorf("%s: encode the answer: %w", t.Name, err)
			}
			res.StructuredContent = json.RawMessage(data)
			if res.Content == nil {
				res.Content = []sdk.Content{&sdk.TextContent{Text: string(data)}}
			}
		}
		return res, nil
	})
}

// schemaFor is T's schema, portable; forInput drops null from every type.
func schemaFor[T any](forInput bool) *jsonschema.Schema {
	t := reflect.TypeFor[T]()
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	s, err := jsonschema.ForType(t, nil)
	if err != nil {
		panic(fmt.Sprintf("mcp: schema of %s: %v", t, err)) // a fixed type
	}
	portable(s, forInput)
	return s
}

// anyValue is the schema of a value of any JSON type, written so that it
// constrains (every type named); null only where nullable.
func anyValue(desc string, nullable bool) *jsonschema.Schema {
	s := &jsonschema.Schema{Description: desc}
	for _, typ := range []string{"object", "array", "string", "number", "boolean"} {
		s.AnyOf = append(s.AnyOf, &jsonschema.Schema{Type: typ})
	}
	if nullable {
		s.AnyOf = append(s.AnyOf, &jsonschema.Schema{Type: "null"})
	}
	return s
}

// annotations are the keywords that constrain nothing.
var annotations = []string{"title", "description", "examples", "default", "deprecated", "readOnly", "writeOnly", "$comment"}

// unconstrained says s accepts any value: it holds annotations only.
func unconstrained(s *jsonschema.Schema) bool {
	data, err := json.Marshal(s)
	if err != nil || string(data) == "true" {
		return err == nil
	}
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		return false
	}
	for k := range m {
		if !slices.Contains(annotations, k) {
			return false
		}
	}
	return true
}

// portable rewrites s in place as described above.
func portable(s *jsonschema.Schema, forInput bool) {
	if s == nil {
		return
	}
	if unconstrained(s) {
		*s = *anyValue(s.Description, !forInput)
		return
	}
	if len(s.Types) > 0 {
		types := slices.DeleteFunc(slices.Clone(s.Types), func(t string) bool { return t == "null" })
		nullable := len(types) < len(s.Types) && !forInput
		s.Types = nil
		if len(types) == 1 && !nullable {
			s.Type = types[0]
		} else {
			// The value's own keywords go with its type; the annotations stay.
			typed := *s
			typed.Title, typed.Description, typed.Default, typed.Examples = "", "", nil, nil
			*s = jsonschema.Schema{Title: s.Title, Description: s.Description, Default: s.Default, Examples: s.Examples}
			for _, t := range types {
				b := typed
				b.Type = t
				s.AnyOf = append(s.AnyOf, &b)
			}
			if nullable {
				s.AnyOf = append(s.AnyOf, &jsonschema.Schema{Type: "null"})
			}
		}
	}
	for _, p := range s.Properties {
		portable(p, forInput)
	}
	for _, l := range [][]*jsonschema.Schema{s.AnyOf, s.AllOf, s.OneOf, s.PrefixItems} {
		for _, b := range l {
			portable(b, forInput)
		}
	}
	if s.Items != nil {
		portable(s.Items, forInput)
	}
	if a := s.AdditionalProperties; a != nil && a.Not == nil && !unconstrained(a) {
		portable(a, forInput)
	}
}

// withRefusal makes out's schema admit a refusal too: code and reasons beside
// the answer's own fields, and either the answer's required fields or the code.
func withRefusal(out *jsonschema.Schema) *jsonschema.Schema {
	if out.Properties == nil {
		out.Properties = map[string]*jsonschema.Schema{}
	}
	enum := make([]any, len(Codes))
	for i, c := range Codes {
		enum[i] = string(c)
	}
	desc := "on a refusal (isError): why, from a fixed list, to branch on"
	if old := out.Properties["code"]; old != nil && old.Description != "" {
		desc = old.Description
	}
	out.Properties["code"] = &jsonschema.Schema{Type: "string", Enum: enum, Description: desc}
	if out.Properties["reasons"] == nil {
		out.Properties["reasons"] = &jsonschema.Schema{Type: "array", Items: &jsonschema.Schema{Type: "string"},
			Description: "on a refusal (isError): every reason, in words"}
	}
	if len(out.PropertyOrder) > 0 {
		for _, k := range []string{"code", "reasons"} {
			if !slices.Contains(out.PropertyOrder, k) {
				out.PropertyOrder = append(out.PropertyOrder, k)
			}
		}
	}
	if len(out.Required) > 0 {
		out.AnyOf = []*jsonschema.Schema{{Required: out.Required}, {Required: []string{"code", "reasons"}}}
		out.Required = nil
	}
	return out
}

// compileInput compiles an input schema for decodeArgs.
func compileInput(in *jsonschema.Schema) (*resultschema.Schema, error) {
	raw, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	return resultschema.Compile(raw)
}

// decodeArgs checks a call's arguments against the tool's input schema and
// decodes them into v: nil, or a refusal (invalid_params) with every problem
// located as arguments.FIELD. What the schema accepts is planspec's validator's
// to say; here its violations are put in words that name the place and say what
// the tool takes.
func decodeArgs(raw json.RawMessage, in *jsonschema.Schema, check *resultschema.Schema, v any) *Refusal {
	var args any = map[string]any{}
	if len(raw) > 0 && string(raw) != "null" { // no arguments: none given
		if err := json.Unmarshal(raw, &args); err != nil {
			return refuse(InvalidParams, "arguments: not JSON: "+err.Error())
		}
	}
	if vs := check.Violations(args); len(vs) > 0 {
		var problems []string
		for _, vi := range vs {
			problems = append(problems, explain(vi, args, in)...)
		}
		return refuse(InvalidParams, problems...)
	}
	data, _ := json.Marshal(args)
	if err := json.Unmarshal(data, v); err != nil {
		return refuse(InvalidParams, "arguments: "+err.Error())
	}
	return nil
}

// explain words a violation of the arguments args against schema in: the value
// at its place and what the place takes; each field missing, with what it is;
// each field unknown, with the fields the tool takes.
func explain(vi resultschema.Violation, args any, in *jsonschema.Schema) []string {
	path, v, s := "arguments", args, in
	for _, tok := range vi.Path {
		switch x := v.(type) {
		case map[string]any:
			path, v = path+"."+tok, x[tok]
			if s != nil {
				s = s.Properties[tok]
			}
		case []any:
			path, v = path+"["+tok+"]", nil
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(x) {
				v = x[i]
			}
			if s != nil {
				s = s.Items
			}
		}
	}
	obj, _ := v.(map[string]any)
	switch {
	case s == nil:
	case vi.Keyword == "type" || vi.Keyword == "anyOf":
		return []string{mismatch(v, s, path)}
	case vi.Keyword == "required":
		var out []string
		for _, k := range s.Required {
			if _, ok := obj[k]; !ok {
				msg := path + "." + k + ": missing"
				if p := s.Properties[k]; p != nil && p.Description != "" {
					msg += " (" + p.Description + ")"
				}
				out = append(out, msg)
			}
		}
		return out
	case vi.Keyword == "additionalProperties":
		var out []string
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			if s.Properties[k] == nil {
				out = append(out, fmt.Sprintf("%s.%s: unknown; %s", path, k, takes(s)))
			}
		}
		return out
	}
	return []string{path + ": " + vi.Msg}
}

// mismatch says that v at path is not what s takes.
func mismatch(v any, s *jsonschema.Schema, path string) string {
	msg := fmt.Sprintf("%s: %s; want %s", path, describe(v), want(s))
	if v == nil && !strings.HasSuffix(path, "]") {
		msg += " (leave it out rather than send null)"
	}
	return msg
}

// takes says which fields an object takes.
func takes(s *jsonschema.Schema) string {
	if len(s.Properties) == 0 {
		return "this tool takes no argument"
	}
	return "it takes " + strings.Join(slices.Sorted(maps.Keys(s.Properties)), ", ")
}

// describe names a value's JSON type, with a short string's value.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		if len(x) > 40 {
			x = x[:40] + "…"
		}
		return fmt.Sprintf("the string %q", x)
	case bool:
		return fmt.Sprintf("the boolean %v", x)
	case float64:
		return fmt.Sprintf("the number %v", x)
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// want says what s takes, in words.
func want(s *jsonschema.Schema) string {
	if len(s.AnyOf) > 0 {
		var l []string
		for _, b := range s.AnyOf {
			l = append(l, want(b))
		}
		return strings.Join(l, " or ")
	}
	w := map[string]string{"string": "a string", "integer": "an integer", "number": "a number", "boolean": "a boolean",
		"array": "an array", "object": "an object", "null": "null"}[s.Type]
	if w == "" {
		w = "a value"
	}
	if s.Type == "array" && s.Items != nil && s.Items.Type != "" {
		w = "an array of " + strings.TrimPrefix(strings.TrimPrefix(want(s.Items), "an "), "a ") + "s"
	}
	return w
}
