package plan

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// groupFirstPlan is a plan whose first step opens a repeat group, and whose
// last step is a group's too.
const groupFirstPlan = `
name: rounds
steps:
  - id: loop
    title: Loop
    repeat: {max: 3}
    steps:
      - {id: edit, title: Edit, instruction: x}
      - {id: judge, title: Judge, instruction: y, exit: 'exists("good")'}
  - id: again
    title: Again
    repeat: {max: 2}
    steps:
      - {id: last, title: Last, instruction: z}
`

// TestPlan_MermaidGroupFirst: with the first step in a repeat group, start
// and its arrow stay outside the group's subgraph, as do the exit out of the
// loop and the arrow into the next group; done is outside every group.
func TestPlan_MermaidGroupFirst(t *testing.T) {
	p, err := ParsePlan(strings.NewReader(groupFirstPlan), "rounds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := `flowchart TD
    %% plan rounds
    start([start])
    subgraph g1["loop: Loop<br/>repeat: max 3"]
    s1["edit: Edit"]
    s2["judge: Judge"]
    s1 --> s2
    end
    start --> s1
    s2 -->|"next round"| s1
    subgraph g2["again: Again<br/>repeat: max 2"]
    s3["last: Last"]
    end
    s2 --> s3
    s2 -.->|"exit: exists(#quot;good#quot;)"| s3
    s3 -->|"next round"| s3
    done([done])
    s3 --> done
`
	if got := p.Mermaid(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

// TestPlan_MermaidGroupsHoldOnlyTheirNodes: Mermaid draws a node inside the
// subgraph of the first link that names it, so no link inside a subgraph may
// name a node declared outside it: start, done, a step before the group or
// after it. Every plan under testdata, straight or side by side, and one
// whose first step is in a group.
func TestPlan_MermaidGroupsHoldOnlyTheirNodes(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(plansDir, "*.yaml"))
	plans := map[string]string{"rounds.yaml": groupFirstPlan}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		plans[filepath.Base(f)] = string(data)
	}
	for name, src := range plans {
		p, err := ParsePlan(strings.NewReader(src), name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		graph := p.MermaidState(func(string) string { return "" }, func(id string) []string { return []string{id + "-1", id + "-2"} })
		for _, leak := range subgraphLeaks(graph) {
			t.Errorf("%s: %s\n%s", name, leak, graph)
		}
	}
}

var (
	mermaidNode = regexp.MustCompile(`^\s*([A-Za-z0-9_]+)(\[|\(\[)`)
	mermaidEdge = regexp.MustCompile(`^\s*([A-Za-z0-9_]+) -(?:->|\.->)(?:\|"[^"]*"\|)? ([A-Za-z0-9_]+)$`)
	mermaidSub  = regexp.MustCompile(`^\s*subgraph ([A-Za-z0-9_]+)`)
)

// subgraphLeaks lists each link inside a subgraph that names a node not
// declared in that subgraph (or one nested in it).
func subgraphLeaks(graph string) []string {
	var (
		open  [][]string // the nodes declared in each open subgraph
		leaks []string
	)
	declaredIn := func(n string, nodes []string) bool {
		for _, x := range nodes {
			if x == n {
				return true
			}
		}
		return false
	}
	for _, line := range strings.Split(graph, "\n") {
		switch {
		case mermaidSub.MatchString(line):
			open = append(open, []string{mermaidSub.FindStringSubmatch(line)[1]})
		case strings.TrimSpace(line) == "end":
			inner := open[len(open)-1]
			open = open[:len(open)-1]
			if len(open) > 0 {
				open[len(open)-1] = append(open[len(open)-1], inner...)
			}
		case mermaidEdge.MatchString(line):
			if len(open) == 0 {
				continue
			}
			m := mermaidEdge.FindStringSubmatch(line)
			for _, n := range m[1:] {
				if !declaredIn(n, open[len(open)-1]) {
					leaks = append(leaks, "the link "+strings.TrimSpace(line)+" inside a subgraph names "+n+", declared outside it")
				}
			}
		case mermaidNode.MatchString(line) && len(open) > 0:
			open[len(open)-1] = append(open[len(open)-1], mermaidNode.FindStringSubmatch(line)[1])
		}
	}
	return leaks
}
