package plan

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"regexp"
	"slices"
	"unicode/utf8"
)

// This is a JSON Schema validator for the subset Schema emits (type, properties,
// required, additionalProperties false, items, pattern, minLength, minItems,
// minimum, enum, anyOf), so that the schema can be tested without a dependency. It
// refuses schemas that use anything else, rather than ignore it.

// annotations carry no constraint.
var annotations = map[string]bool{"$schema": true, "$id": true, "title": true, "description": true, "examples": true}

var keywords = map[string]bool{"type": true, "properties": true, "required": true, "additionalProperties": true,
	"items": true, "pattern": true, "minLength": true, "minItems": true, "minimum": true, "enum": true, "anyOf": true}

// checkSchemaKeywords reports the first keyword validateSchema does not know.
func checkSchemaKeywords(s map[string]any, at string) string {
	for _, k := range slices.Sorted(maps.Keys(s)) {
		switch {
		case annotations[k]:
		case !keywords[k]:
			return fmt.Sprintf("%s: keyword %q is not supported by the test validator", at, k)
		case k == "additionalProperties" && s[k] != false:
			return fmt.Sprintf("%s: additionalProperties must be false", at)
		case k == "properties":
			props := s[k].(map[string]any)
			for _, name := range slices.Sorted(maps.Keys(props)) {
				if err := checkSchemaKeywords(props[name].(map[string]any), at+"/properties/"+name); err != "" {
					return err
				}
			}
		case k == "items":
			if err := checkSchemaKeywords(s[k].(map[string]any), at+"/items"); err != "" {
				return err
			}
		case k == "anyOf":
			for i, sub := range s[k].([]any) {
				if err := checkSchemaKeywords(sub.(map[string]any), fmt.Sprintf("%s/anyOf/%d", at, i)); err != "" {
					return err
				}
			}
		case k == "pattern":
			if _, err := regexp.Compile(s[k].(string)); err != nil {
				return fmt.Sprintf("%s: pattern: %v", at, err)
			}
		}
	}
	return ""
}

// validateSchema checks v, as yaml.v3 or encoding/json decode into any, against
// schema, and returns every violation.
func validateSchema(schema map[string]any, v any, at string) []string {
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, at+": "+fmt.Sprintf(format, args...)) }

	if forms, ok := schema["anyOf"].([]any); ok && !slices.ContainsFunc(forms, func(s any) bool {
		return len(validateSchema(s.(map[string]any), v, at)) == 0
	}) {
		fail("matches none of the %d allowed forms", len(forms))
	}
	if t, ok := schema["type"]; ok {
		types, isList := t.([]any)
		if !isList {
			types = []any{t}
		}
		if !slices.ContainsFunc(types, func(t any) bool { return hasType(v, t.(string)) }) {
			fail("want type %v, got %T", t, v)
			return errs // the other keywords assume the type
		}
	}
	if enum, ok := schema["enum"].([]any); ok && !slices.ContainsFunc(enum, func(e any) bool { return reflect.DeepEqual(e, v) }) {
		fail("%v is not one of %v", v, enum)
	}
	switch v := v.(type) {
	case string:
		if n, ok := schema["minLength"].(float64); ok && float64(utf8.RuneCountInString(v)) < n {
			fail("shorter than %v", n)
		}
		if p, ok := schema["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(v) {
			fail("%q does not match %s", v, p)
		}
	case int, int64, float64:
		if n, ok := schema["minimum"].(float64); ok && toFloat(v) < n {
			fail("%v is less than %v", v, n)
		}
	case []any:
		if n, ok := schema["minItems"].(float64); ok && float64(len(v)) < n {
			fail("fewer than %v items", n)
		}
		if items, ok := schema["items"].(map[string]any); ok {
			for i, it := range v {
				errs = append(errs, validateSchema(items, it, fmt.Sprintf("%s/%d", at, i))...)
			}
		}
	case map[string]any:
		for _, r := range asList(schema["required"]) {
			if _, ok := v[r.(string)]; !ok {
				fail("missing required %q", r)
			}
		}
		props, _ := schema["properties"].(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(v)) {
			p, ok := props[k]
			switch {
			case ok:
				errs = append(errs, validateSchema(p.(map[string]any), v[k], at+"/"+k)...)
			case schema["additionalProperties"] == false:
				fail("unknown property %q", k)
			}
		}
	}
	return errs
}

func hasType(v any, t string) bool {
	switch t {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	case "number":
		switch v.(type) {
		case int, int64, float64:
			return true
		}
	case "integer":
		switch v := v.(type) {
		case int, int64:
			return true
		case float64:
			return v == math.Trunc(v) && !math.IsInf(v, 0)
		}
	}
	return false
}

func toFloat(v any) float64 {
	switch v := v.(type) {
	case int:
		return float64(v)
	case int64:
		return float64(v)
	case float64:
		return v
	}
	return math.NaN()
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
