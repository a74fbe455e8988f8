package plan

import (
	"strings"
	"testing"
)

// TestParsePlan_UnclosedQuote: a quoted value that never closes is reported
// where its quote opens, on the first line too, with the fix, whatever comes
// before it on its line or after it in the file.
func TestParsePlan_UnclosedQuote(t *testing.T) {
	for _, c := range []struct{ name, plan, want string }{
		{"on line 2", "steps:\n  - title: \"Write\n    id: a\n    instruction: x\n", "p.yaml:2:12: "},
		{"on line 1", "name: 'nightly\nsteps:\n  - id: a\n    title: A\n    instruction: x\n", "p.yaml:1:7: "},
		{"after an escaped quote", "steps:\n  - id: a\n    title: \"say \\\"hi\n    instruction: x\n", "p.yaml:3:12: "},
		{"after a doubled single quote", "steps:\n  - id: a\n    title: 'it''s\n    instruction: x\n", "p.yaml:3:12: "},
		{"after an apostrophe in a word", "steps: [{id: a, title: don't, instruction: \"x}]\n", "p.yaml:1:44: "},
		{"before a second document", "steps:\n  - id: a\n    title: \"A\n    instruction: x\n---\nname: b\n", "p.yaml:3:12: "},
		{"in a flow list", "steps: [{id: a, title: A, instruction: \"x}]\n", "p.yaml:1:40: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParsePlan(strings.NewReader(c.plan), "p.yaml")
			if err == nil {
				t.Fatal("want an error, got a plan")
			}
			got := err.Error()
			if !strings.HasPrefix(got, c.want) || !strings.Contains(got, "never closed: close the quote") {
				t.Errorf("got %q, want it at %q with the fix", got, c.want)
			}
		})
	}
}
