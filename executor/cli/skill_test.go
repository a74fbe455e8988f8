package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestSkill_KeyListsMatchTheSchema: the plan and step keys examples/SKILL.md
// lists are those of `stepseq schema`, no more and no fewer. The skill warns that
// an unknown key rejects a plan: its list must be whole and exact.
func TestSkill_KeyListsMatchTheSchema(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"schema"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(out.Bytes(), &schema); err != nil {
		t.Fatal(err)
	}
	var steps struct {
		Items struct {
			AnyOf []struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"anyOf"`
		} `json:"items"`
	}
	if err := json.Unmarshal(schema.Properties["steps"], &steps); err != nil || len(steps.Items.AnyOf) != 2 {
		t.Fatalf("steps' items: want anyOf a step and a group (%v)", err)
	}
	skill, err := os.ReadFile("../../examples/SKILL.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		lead string
		keys map[string]json.RawMessage
	}{{"Plan keys:", schema.Properties}, {"Step keys:", steps.Items.AnyOf[0].Properties}, {"Group keys", steps.Items.AnyOf[1].Properties}} {
		listed := skillKeys(t, string(skill), c.lead)
		for k := range c.keys {
			if !slices.Contains(listed, k) {
				t.Errorf("SKILL.md's %q leaves out %s", c.lead, k)
			}
		}
		for _, k := range listed {
			if _, ok := c.keys[k]; !ok {
				t.Errorf("SKILL.md's %q lists %s, which stepseq schema does not have", c.lead, k)
			}
		}
	}
}

// skillKeys is the keys a paragraph of the skill lists: the paragraph starting
// with lead, its backquoted names outside parentheses (which hold the values).
func skillKeys(t *testing.T, skill, lead string) []string {
	t.Helper()
	i := strings.Index(skill, "\n"+lead)
	if i < 0 {
		t.Fatalf("SKILL.md has no paragraph starting %q", lead)
	}
	para, _, _ := strings.Cut(skill[i+1:], "\n\n")
	var top strings.Builder
	depth := 0
	for _, r := range para {
		switch {
		case r == '(':
			depth++
		case r == ')':
			depth--
		case depth == 0:
			top.WriteRune(r)
		}
	}
	var keys []string
	for _, m := range regexp.MustCompile("`([A-Za-z]+)`").FindAllStringSubmatch(top.String(), -1) {
		keys = append(keys, m[1])
	}
	return keys
}
