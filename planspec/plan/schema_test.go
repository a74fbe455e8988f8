package plan

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func schemaDoc(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(Schema(), &doc); err != nil {
		t.Fatalf("Schema() is not JSON: %v", err)
	}
	return doc
}

func TestSchema(t *testing.T) {
	golden(t, "testdata/plan.schema.json", Schema())
	doc := schemaDoc(t)
	if doc["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %v", doc["$schema"])
	}
	if err := checkSchemaKeywords(doc, "#"); err != "" {
		t.Fatal(err)
	}
	// The schema and the parser know the same keys.
	props := doc["properties"].(map[string]any)
	if got := slices.Sorted(maps.Keys(props)); !slices.Equal(got, slices.Sorted(slices.Values(planKeys))) {
		t.Errorf("schema plan keys %v, parser %v", got, planKeys)
	}
	entries := props["steps"].(map[string]any)["items"].(map[string]any)["anyOf"].([]any)
	step := entries[0].(map[string]any)["properties"].(map[string]any)
	if got := slices.Sorted(maps.Keys(step)); !slices.Equal(got, slices.Sorted(slices.Values(stepKeys))) {
		t.Errorf("schema step keys %v, parser %v", got, stepKeys)
	}
	group := entries[1].(map[string]any)["properties"].(map[string]any)
	if got := slices.Sorted(maps.Keys(group)); !slices.Equal(got, slices.Sorted(slices.Values(groupKeys))) {
		t.Errorf("schema group keys %v, parser %v", got, groupKeys)
	}
}

// planFiles lists the good plans of the repository: testdata/plans/*.yaml, and
// under examples/ every *.plan.yaml and every YAML file in a plans/ directory
// (other YAML there, such as Kubernetes manifests, is not a plan).
func planFiles(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(plansDir, "*.yaml"))
	err := filepath.WalkDir("../../examples", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		base := d.Name()
		isYAML := strings.HasSuffix(base, ".yaml") || strings.HasSuffix(base, ".yml")
		if strings.HasSuffix(base, ".plan.yaml") || strings.HasSuffix(base, ".plan.yml") ||
			isYAML && filepath.Base(filepath.Dir(p)) == "plans" {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestSchema_Plans validates every good plan of the repository against the
// schema, so that an editor never flags a plan that stepseq accepts.
func TestSchema_Plans(t *testing.T) {
	schema := schemaDoc(t)
	for _, file := range planFiles(t) {
		t.Run(strings.TrimPrefix(file, "../"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ParsePlan(bytes.NewReader(data), file); err != nil {
				t.Fatalf("not a valid plan:\n%v", err)
			}
			var v any
			if err := yaml.Unmarshal(data, &v); err != nil {
				t.Fatal(err)
			}
			if errs := validateSchema(schema, v, "#"); len(errs) > 0 {
				t.Errorf("the schema rejects a valid plan:\n%s", strings.Join(errs, "\n"))
			}
		})
	}
}

// TestSchema_BadPlans checks that the schema catches what it can say: the bad
// plans whose problems are of shape, not of meaning.
func TestSchema_BadPlans(t *testing.T) {
	schema := schemaDoc(t)
	for _, name := range []string{
		"unknown-key", "wrong-types", "durations", "bad-id", "empty-text", "no-steps",
		"missing-steps", "null-values", "not-a-mapping", "paths",
	} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(plansDir, "bad", name+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			var v any
			if err := yaml.Unmarshal(data, &v); err != nil {
				t.Fatal(err)
			}
			if errs := validateSchema(schema, v, "#"); len(errs) == 0 {
				t.Error("the schema accepts it")
			}
		})
	}
}

func TestValidateSchema(t *testing.T) {
	schema := map[string]any{
		"type":                 "object",
		"required":             []any{"a"},
		"additionalProperties": false,
		"properties": map[string]any{
			"a": map[string]any{"type": "string", "minLength": float64(2), "pattern": "^x"},
			"b": map[string]any{"type": "array", "minItems": float64(1), "items": map[string]any{"type": "integer", "minimum": float64(0)}},
			"c": map[string]any{"enum": []any{"red", "green"}},
			"d": map[string]any{"type": []any{"string", "null"}},
		},
	}
	for _, tc := range []struct {
		v    any
		errs int
	}{
		{map[string]any{"a": "xy"}, 0},
		{map[string]any{"a": "xy", "b": []any{1, float64(2)}, "c": "red", "d": nil}, 0},
		{map[string]any{}, 1},                                    // required
		{map[string]any{"a": "xy", "e": 1}, 1},                   // additionalProperties
		{map[string]any{"a": "x"}, 1},                            // minLength
		{map[string]any{"a": "yy"}, 1},                           // pattern
		{map[string]any{"a": 1}, 1},                              // type
		{map[string]any{"a": "xy", "b": []any{}}, 1},             // minItems
		{map[string]any{"a": "xy", "b": []any{-1, 1.5, "s"}}, 3}, // minimum, integer, type
		{map[string]any{"a": "xy", "c": "blue", "d": 1}, 2},      // enum, type list
		{[]any{}, 1}, // not an object
		{map[string]any{"a": "xy", "b": []any{1}, "c": "green"}, 0}, // all good
	} {
		if errs := validateSchema(schema, tc.v, "#"); len(errs) != tc.errs {
			t.Errorf("%v: got %d errors %v, want %d", tc.v, len(errs), errs, tc.errs)
		}
	}
	if err := checkSchemaKeywords(map[string]any{"type": "string", "format": "email"}, "#"); err == "" {
		t.Error("an unknown keyword went unnoticed")
	}
}
