package plan

import (
	"strings"
	"testing"

	"github.com/stepseq/stepseq/planspec"
)

func TestMermaidText(t *testing.T) {
	for in, want := range map[string]string{
		`plain`:                 `plain`,
		`say "hi"`:              `say #quot;hi#quot;`,
		`a | b`:                 `a #124; b`,
		`<b>&amp;</b>`:          `#lt;b#gt;#amp;amp;#lt;/b#gt;`,
		"`md`":                  `#96;md#96;`,
		`#quot; stays literal`:  `#35;quot; stays literal`,
		"two\nlines\r\nand\rcr": `two<br/>lines<br/>and<br/>cr`,
	} {
		if got := mermaidText(in); got != want {
			t.Errorf("mermaidText(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPlan_Mermaid(t *testing.T) {
	p, err := ParsePlan(strings.NewReader(`
steps:
  - {id: a, title: 'Say "hi"', instruction: x}
  - {id: b, title: B, instruction: x, when: 'exists("go.txt")', skip: 'steps.a.skipped', check: 'read("b") contains "|"'}
`), "graph.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := `flowchart TD
    %% plan graph
    start([start])
    s1["a: Say #quot;hi#quot;"]
    start --> s1
    s2["b: B<br/>check: read(#quot;b#quot;) contains #quot;#124;#quot;"]
    s1 -->|"when: exists(#quot;go.txt#quot;)<br/>skip if: steps.a.skipped"| s2
    done([done])
    s2 --> done
`
	if got := p.Mermaid(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

// TestPlan_MermaidApproval: a step's gate labels the edge into it, and a step
// awaiting approval has its colour.
func TestPlan_MermaidApproval(t *testing.T) {
	p, err := ParsePlan(strings.NewReader("steps:\n  - {id: a, title: A, instruction: x}\n  - {id: b, title: B, instruction: y, approve: true}\n"), "g.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := p.MermaidPhases(func(id string) string {
		if id == "b" {
			return planspec.PhaseAwaitingApproval
		}
		return planspec.PhaseDone
	})
	for _, want := range []string{`s1 -->|"a person's yes"| s2`, "classDef awaitingapproval fill:#ccfbf1,stroke:#0d9488", "class s2 awaitingapproval"} {
		if !strings.Contains(got, want) {
			t.Errorf("the graph lacks %q:\n%s", want, got)
		}
	}
}
