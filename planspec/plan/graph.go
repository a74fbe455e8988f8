package plan

import (
	"fmt"
	"strings"

	"github.com/stepseq/stepseq/planspec"
)

// Mermaid draws the plan as a Mermaid flowchart: the steps top to bottom in the
// order they run, each gate (when, skip) on the edge into its step, each check,
// output and trigger in its step's box, a repeat group as a subgraph with its
// back edge and each exit as a dotted edge out of its loop. Paste it into any Markdown that renders
// Mermaid, or https://mermaid.live.
func (p *Plan) Mermaid() string { return p.MermaidPhases(nil) }

// phaseStyles colour a step's box by its phase.
var phaseStyles = []struct{ phase, style string }{
	{planspec.PhasePlanned, "fill:#eeeeee,stroke:#888888"},
	{planspec.PhaseAwaitingApproval, "fill:#ccfbf1,stroke:#0d9488"},
	{planspec.PhaseDispatching, "fill:#fff3cd,stroke:#b58900"},
	{"running", "fill:#d6e9ff,stroke:#1f6feb"},
	{planspec.PhaseInProgress, "fill:#d6e9ff,stroke:#1f6feb"},
	{planspec.PhaseBlocked, "fill:#ffd7d5,stroke:#cf222e"},
	{planspec.PhaseReviewing, "fill:#eadcff,stroke:#8250df"},
	{planspec.PhaseDone, "fill:#d3f5d9,stroke:#1a7f37"},
	{"failed", "fill:#ffe8cc,stroke:#bc4c00"},
}

// MermaidPhases is Mermaid with each step's box coloured by its phase, as phase
// says for a step id ("" leaves it plain). A nil phase draws the plan alone.
func (p *Plan) MermaidPhases(phase func(id string) string) string {
	if p.IsGraph() {
		return p.mermaidGraph(phase, nil)
	}
	var b strings.Builder
	b.WriteString("flowchart TD\n")
	fmt.Fprintf(&b, "    %%%% plan %s\n", strings.Join(strings.Fields(p.Name), " "))
	b.WriteString("    start([start])\n")
	prev := "start"
	// A group is a subgraph with its back edge; a step's exit is a dotted edge
	// out of its loop, to the node after the group (outside a loop, to done).
	groupAt := map[string]int{} // first step id → index of its group
	for gi, g := range p.Groups {
		if len(g.Steps) > 0 {
			groupAt[g.Steps[0]] = gi
		}
	}
	var inGroup *planspec.Group
	var groupFirst string
	var exits, toDone [][2]string // node, label
	// Mermaid puts a node into the subgraph of the first link that names it,
	// wherever the node was declared: an edge from outside a group (start, the
	// step before it, the exit of an earlier loop) is held until the group ends.
	edges := groupEdges{b: &b}
	flushExits := func(to string) {
		for _, e := range exits {
			edges.add(e[0], to, fmt.Sprintf("    %s -.->|\"%s\"| %s\n", e[0], mermaidText(e[1]), to))
		}
		exits = nil
	}
	for i, s := range p.Steps {
		node := fmt.Sprintf("s%d", i+1)
		flushTo := "" // the node that the loop before it leaves to
		if inGroup == nil {
			flushTo = node
		}
		if gi, ok := groupAt[s.ID]; ok {
			g := &p.Groups[gi]
			inGroup, groupFirst = g, node
			fmt.Fprintf(&b, "    subgraph g%d[\"%s\"]\n", gi+1, mermaidText(mermaidGroupTitle(g)))
			edges.open()
		}
		fmt.Fprintf(&b, "    %s[\"%s\"]\n", node, mermaidText(mermaidStepLabel(s)))
		edges.declare(node)
		if gates := mermaidGates(s); gates != "" {
			edges.add(prev, node, fmt.Sprintf("    %s -->|\"%s\"| %s\n", prev, mermaidText(gates), node))
		} else {
			edges.add(prev, node, fmt.Sprintf("    %s --> %s\n", prev, node))
		}
		prev = node
		if flushTo != "" {
			flushExits(flushTo)
		}
		if s.Spec.Exit != "" {
			e := [2]string{node, "exit: " + strings.TrimSpace(s.Spec.Exit)}
			if inGroup != nil {
				exits = append(exits, e)
			} else {
				toDone = append(toDone, e)
			}
		}
		if inGroup != nil && inGroup.Steps[len(inGroup.Steps)-1] == s.ID {
			b.WriteString("    end\n")
			edges.close()
			fmt.Fprintf(&b, "    %s -->|\"next round\"| %s\n", node, groupFirst)
			inGroup = nil
		}
	}
	b.WriteString("    done([done])\n")
	fmt.Fprintf(&b, "    %s --> done\n", prev)
	exits = append(exits, toDone...)
	flushExits("done")
	if phase != nil {
		p.mermaidClasses(&b, phase)
	}
	return b.String()
}

// groupEdges writes a straight plan's edges: at once outside a group, and
// inside one only an edge between two of its own nodes; any other is held
// and written after the group's end, so that no node outside a group is drawn
// inside it.
type groupEdges struct {
	b       *strings.Builder
	inside  map[string]bool // the open group's nodes; nil outside a group
	pending []string
}

func (e *groupEdges) open() { e.inside = map[string]bool{} }

func (e *groupEdges) declare(node string) {
	if e.inside != nil {
		e.inside[node] = true
	}
}

func (e *groupEdges) add(from, to, line string) {
	if e.inside != nil && !(e.inside[from] && e.inside[to]) {
		e.pending = append(e.pending, line)
		return
	}
	e.b.WriteString(line)
}

// close writes the edges held while the group was open, after its end.
func (e *groupEdges) close() {
	for _, l := range e.pending {
		e.b.WriteString(l)
	}
	e.inside, e.pending = nil, nil
}

// mermaidGroupTitle is a repeat group's subgraph title: its id and title, and
// how many rounds it may run.
func mermaidGroupTitle(g *planspec.Group) string {
	title := g.ID
	if t := strings.TrimSpace(g.Title); t != "" {
		title += ": " + t
	}
	title += "\nrepeat: max " + strings.TrimSpace(g.Max)
	if g.OnMax == planspec.OnMaxDone {
		title += ", onMax: done"
	}
	return title
}

// mermaidStepLabel is a step's box: its id and title, with what makes it done
// (outputs, check), what aborts it and which files it follows.
func mermaidStepLabel(s PlanStep) string {
	label := []string{s.ID + ": " + strings.TrimSpace(s.Spec.Title)}
	if len(s.Spec.RequiredOutputs) > 0 {
		label = append(label, "outputs: "+strings.Join(s.Spec.RequiredOutputs, ", "))
	}
	if s.Spec.Check != "" {
		label = append(label, "check: "+strings.TrimSpace(s.Spec.Check))
	}
	if s.Spec.Abort != "" {
		label = append(label, "abort if: "+strings.TrimSpace(s.Spec.Abort))
	}
	if len(s.Spec.On) > 0 {
		label = append(label, "on: "+strings.Join(s.Spec.On, ", "))
	}
	return strings.Join(label, "\n")
}

// mermaidGates labels the edge into a step with its gates (when, skip, approve); "" when
// it has none.
func mermaidGates(s PlanStep) string {
	var gates []string
	if s.Spec.When != "" {
		gates = append(gates, "when: "+strings.TrimSpace(s.Spec.When))
	}
	if s.Spec.Skip != "" {
		gates = append(gates, "skip if: "+strings.TrimSpace(s.Spec.Skip))
	}
	if s.Spec.Approve != nil {
		gates = append(gates, "a person's yes")
	}
	return strings.Join(gates, "\n")
}

// mermaidClasses colours each step's box by the phase that phase gives it.
func (p *Plan) mermaidClasses(b *strings.Builder, phase func(id string) string) {
	used := map[string][]string{}
	for i, s := range p.Steps {
		if ph := phase(s.ID); ph != "" {
			used[ph] = append(used[ph], fmt.Sprintf("s%d", i+1))
		}
	}
	for _, ps := range phaseStyles {
		if nodes := used[ps.phase]; len(nodes) > 0 {
			fmt.Fprintf(b, "    classDef %s %s\n", strings.ReplaceAll(ps.phase, "_", ""), ps.style)
			fmt.Fprintf(b, "    class %s %s\n", strings.Join(nodes, ","), strings.ReplaceAll(ps.phase, "_", ""))
		}
	}
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
