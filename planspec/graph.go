package planspec

import (
	"fmt"
	"strings"
)

// Mermaid draws the plan as a Mermaid flowchart: the steps top to bottom in the
// order they run, each gate (when, skip) on the edge into its step, each check,
// output and trigger in its step's box. Paste it into any Markdown that renders
// Mermaid, or https://mermaid.live.
func (p *Plan) Mermaid() string {
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
