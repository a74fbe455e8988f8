package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stepseq/stepseq/planspec"
)

// MermaidState is MermaidPhases of the plan as a state runs it: each step
// coloured by its phase there, and a foreach step that made its instances
// drawn as a box holding them (instances names them, nil: none).
func (p *Plan) MermaidState(phase func(id string) string, instances func(id string) []string) string {
	if !p.IsGraph() {
		return p.MermaidPhases(phase)
	}
	return p.mermaidGraph(phase, instances)
}

// mermaidGraph draws a plan whose steps run side by side: an arrow into each
// step from each step it needs (from start when it needs none), a repeat
// group as a subgraph with its back edge, a foreach step with its list, and
// an arrow to done from each step nothing needs.
func (p *Plan) mermaidGraph(phase func(id string) string, instances func(id string) []string) string {
	var b strings.Builder
	b.WriteString("flowchart TD\n")
	fmt.Fprintf(&b, "    %%%% plan %s\n", strings.Join(strings.Fields(p.Name), " "))
	b.WriteString("    start([start])\n")
	node := map[string]string{}
	for i, s := range p.Steps {
		node[s.ID] = fmt.Sprintf("s%d", i+1)
	}
	groupOf := map[string]*planspec.Group{}
	for i := range p.Groups {
		for _, id := range p.Groups[i].Steps {
			groupOf[id] = &p.Groups[i]
		}
	}
	needed := map[string]bool{}
	var colored [][2]string // node, step or instance id
	for _, s := range p.Steps {
		g := groupOf[s.ID]
		if g != nil && g.Steps[0] == s.ID {
			fmt.Fprintf(&b, "    subgraph g%d[\"%s\"]\n", slices.IndexFunc(p.Groups, func(x planspec.Group) bool { return x.ID == g.ID })+1, mermaidText(mermaidGroupTitle(g)))
		}
		colored = append(colored, p.mermaidNode(&b, s, node[s.ID], instances)...)
		if g != nil && g.Steps[len(g.Steps)-1] == s.ID {
			b.WriteString("    end\n")
			fmt.Fprintf(&b, "    %s -->|\"next round\"| %s\n", node[s.ID], node[g.Steps[0]])
		}
	}
	for _, s := range p.Steps {
		from := s.Spec.Needs
		if len(from) == 0 {
			from = []string{""}
		}
		gates := mermaidGates(s)
		for _, n := range from {
			src := "start"
			if n != "" {
				src, needed[n] = node[n], true
			}
			if gates != "" {
				fmt.Fprintf(&b, "    %s -->|\"%s\"| %s\n", src, mermaidText(gates), node[s.ID])
			} else {
				fmt.Fprintf(&b, "    %s --> %s\n", src, node[s.ID])
			}
		}
	}
	b.WriteString("    done([done])\n")
	for _, s := range p.Steps {
		if !needed[s.ID] {
			fmt.Fprintf(&b, "    %s --> done\n", node[s.ID])
		}
	}
	if phase != nil {
		mermaidColor(&b, phase, colored)
	}
	return b.String()
}

// mermaidNode draws step s as its box, or, for a foreach step with instances,
// as a subgraph holding one box per instance; it returns the boxes drawn with
// the id each stands for.
func (p *Plan) mermaidNode(b *strings.Builder, s PlanStep, n string, instances func(string) []string) [][2]string {
	label := mermaidStepLabel(s)
	if s.Spec.Foreach != "" {
		label += "\nforeach: " + strings.TrimSpace(s.Spec.Foreach)
	}
	if s.Spec.Worktree {
		label += "\nworktree, merge: " + s.Spec.Merge
	}
	var insts []string
	if instances != nil && s.Spec.Foreach != "" {
		insts = instances(s.ID)
	}
	if len(insts) == 0 {
		fmt.Fprintf(b, "    %s[\"%s\"]\n", n, mermaidText(label))
		return [][2]string{{n, s.ID}}
	}
	fmt.Fprintf(b, "    subgraph %s[\"%s\"]\n", n, mermaidText(label))
	var out [][2]string
	for i, id := range insts {
		in := fmt.Sprintf("%si%d", n, i)
		fmt.Fprintf(b, "    %s[\"%s\"]\n", in, mermaidText(id))
		out = append(out, [2]string{in, id})
	}
	b.WriteString("    end\n")
	return out
}

// mermaidColor colours each box by the phase its step or instance has.
func mermaidColor(b *strings.Builder, phase func(string) string, boxes [][2]string) {
	used := map[string][]string{}
	for _, box := range boxes {
		if ph := phase(box[1]); ph != "" {
			used[ph] = append(used[ph], box[0])
		}
	}
	for _, ps := range phaseStyles {
		if nodes := used[ps.phase]; len(nodes) > 0 {
			fmt.Fprintf(b, "    classDef %s %s\n", strings.ReplaceAll(ps.phase, "_", ""), ps.style)
			fmt.Fprintf(b, "    class %s %s\n", strings.Join(nodes, ","), strings.ReplaceAll(ps.phase, "_", ""))
		}
	}
}
