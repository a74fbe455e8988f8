package planspec

import (
	"fmt"
	"strings"
)

// Mermaid draws the plan as a Mermaid flowchart: the steps top to bottom in the
// order they run, each gate (when, skip) on the edge into its step, each check,
// output and trigger in its step's box. Paste it into any Markdown that renders
// Mermaid, or https://mermaid.live.
func (p *Plan) Mermaid() string { return p.MermaidPhases(nil) }

// phaseStyles colour a step's box by its phase (DESIGN §7).
var phaseStyles = []struct{ phase, style string }{
	{PhasePlanned, "fill:#eeeeee,stroke:#888888"},
	{PhaseDispatching, "fill:#fff3cd,stroke:#b58900"},
	{"running", "fill:#d6e9ff,stroke:#1f6feb"},
	{PhaseInProgress, "fill:#d6e9ff,stroke:#1f6feb"},
	{PhaseBlocked, "fill:#ffd7d5,stroke:#cf222e"},
	{PhaseReviewing, "fill:#eadcff,stroke:#8250df"},
	{PhaseDone, "fill:#d3f5d9,stroke:#1a7f37"},
	{"failed", "fill:#ffe8cc,stroke:#bc4c00"},
}

// MermaidPhases is Mermaid with each step's box coloured by its phase, as phase
// says for a step id ("" leaves it plain). A nil phase draws the plan alone.
func (p *Plan) MermaidPhases(phase func(id string) string) string {
	var b strings.Builder
	b.WriteString("flowchart TD\n")
	fmt.Fprintf(&b, "    %%%% plan %s\n", strings.Join(strings.Fields(p.Name), " "))
	b.WriteString("    start([start])\n")
	prev := "start"
	for i, s := range p.Steps {
		node := fmt.Sprintf("s%d", i+1)
		label := []string{s.ID + ": " + strings.TrimSpace(s.Spec.Title)}
		if len(s.Spec.RequiredOutputs) > 0 {
			label = append(label, "outputs: "+strings.Join(s.Spec.RequiredOutputs, ", "))
		}
		if s.Spec.Check != "" {
			label = append(label, "check: "+strings.TrimSpace(s.Spec.Check))
		}
		if len(s.Spec.On) > 0 {
			label = append(label, "on: "+strings.Join(s.Spec.On, ", "))
		}
		fmt.Fprintf(&b, "    %s[\"%s\"]\n", node, mermaidText(strings.Join(label, "\n")))

		var gates []string
		if s.Spec.When != "" {
			gates = append(gates, "when: "+strings.TrimSpace(s.Spec.When))
		}
		if s.Spec.Skip != "" {
			gates = append(gates, "skip if: "+strings.TrimSpace(s.Spec.Skip))
		}
		if len(gates) > 0 {
			fmt.Fprintf(&b, "    %s -->|\"%s\"| %s\n", prev, mermaidText(strings.Join(gates, "\n")), node)
		} else {
			fmt.Fprintf(&b, "    %s --> %s\n", prev, node)
		}
		prev = node
	}
	b.WriteString("    done([done])\n")
	fmt.Fprintf(&b, "    %s --> done\n", prev)
	if phase == nil {
		return b.String()
	}
	used := map[string][]string{}
	for i, s := range p.Steps {
		if ph := phase(s.ID); ph != "" {
			used[ph] = append(used[ph], fmt.Sprintf("s%d", i+1))
		}
	}
	for _, ps := range phaseStyles {
		if nodes := used[ps.phase]; len(nodes) > 0 {
			fmt.Fprintf(&b, "    classDef %s %s\n", strings.ReplaceAll(ps.phase, "_", ""), ps.style)
			fmt.Fprintf(&b, "    class %s %s\n", strings.Join(nodes, ","), strings.ReplaceAll(ps.phase, "_", ""))
		}
	}
	return b.String()
}

// mermaidReplacer escapes text for a quoted Mermaid label with entity codes:
// quotes would end the label, | an edge label, < and & start HTML, # an entity,
// a backtick a Markdown string. Newlines become line breaks.
var mermaidReplacer = strings.NewReplacer(
	"#", "#35;",
	`"`, "#quot;",
	"<", "#lt;",
	">", "#gt;",
	"&", "#amp;",
	"|", "#124;",
	"`", "#96;",
	"\r\n", "<br/>",
	"\n", "<br/>",
	"\r", "<br/>",
)

func mermaidText(s string) string { return mermaidReplacer.Replace(s) }
