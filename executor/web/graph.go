package web

import (
	"fmt"
	"slices"
)

// The graph's geometry, in CSS pixels.
const (
	nodeW    = 164
	nodeH    = 62
	gapX     = 34
	gapY     = 18
	graphPad = 12
	// labelRunes is about what fits on one line of a box at the page's font size.
	labelRunes = 22
)

// graph is the plan laid out for inline SVG: steps in columns by their depth,
// arrows as paths.
type graph struct {
	Width, Height int
	Nodes         []graphNode
	Edges         []graphEdge
	Loops         []graphLoop
}

// graphLoop is the frame around a repeat group's steps, with its label.
type graphLoop struct {
	X, Y, W, H int
	Label      string
}

// loopTop is the room above the steps for a loop's label.
const loopTop = 16

type graphNode struct {
	X, Y   int
	W, H   int
	Anchor string // the fragment of the step's row
	StepID string
	ID     string // the step id, cut to fit
	Label  string // the step title, cut to fit
	Title  string // the tooltip: id, title and phase, whole
	Class  string
	Phase  string // the phase as the page words it
	Tries  int
}

type graphEdge struct {
	Path string
}

// layout places the steps left to right: a step's column is one more than the
// deepest step with an arrow into it, so every arrow points right unless the
// edges make a cycle. Within a column steps keep their order in the view.
// columns places each of n steps in a column after every step it follows:
// Kahn's order, taking the lowest index first so that a chain keeps its order,
// and a cycle broken at the first step left.
func columns(n int, edges [][2]int) []int {
	preds := make([][]int, n)
	indeg := make([]int, n)
	for _, e := range edges {
		preds[e[1]] = append(preds[e[1]], e[0])
		indeg[e[1]]++
	}
	col := make([]int, n)
	placed := make([]bool, n)
	for range n {
		next := -1
		for i := range n {
			if !placed[i] && indeg[i] == 0 {
				next = i
				break
			}
		}
		if next < 0 { // a cycle: break it at the first step left
			next = slices.Index(placed, false)
		}
		placed[next] = true
		for _, p := range preds[next] {
			if placed[p] && p != next {
				col[next] = max(col[next], col[p]+1)
			}
		}
		for _, e := range edges {
			if e[0] == next {
				indeg[e[1]]--
			}
		}
	}
	return col
}

func layout(v View, rows []stepRow) graph {
	n := len(v.Steps)
	index := make(map[string]int, n)
	for i, s := range v.Steps {
		if _, dup := index[s.ID]; !dup {
			index[s.ID] = i
		}
	}
	edges := graphEdges(v, index)
	col := columns(n, edges)
	g := graph{}
	top := graphPad
	if len(v.Loops) > 0 {
		top += loopTop
	}
	perCol := map[int]int{}
	cols, rowsMax := 0, 0
	for i, s := range v.Steps {
		r := perCol[col[i]]
		perCol[col[i]]++
		cols, rowsMax = max(cols, col[i]+1), max(rowsMax, r+1)
		row := rows[i]
		g.Nodes = append(g.Nodes, graphNode{
			X: graphPad + col[i]*(nodeW+gapX), Y: top + r*(nodeH+gapY), W: nodeW, H: nodeH,
			Anchor: row.Anchor, StepID: s.ID, ID: cut(s.ID, labelRunes-2), Label: cut(s.Title, labelRunes),
			Title: s.ID + ": " + s.Title + " (" + row.PhaseLabel + ")",
			Class: row.PhaseClass, Phase: row.PhaseLabel, Tries: s.Tries,
		})
	}
	g.Width = 2*graphPad + max(cols, 1)*nodeW + max(cols-1, 0)*gapX
	g.Height = top + graphPad + max(rowsMax, 1)*nodeH + max(rowsMax-1, 0)*gapY
	for _, l := range v.Loops {
		if f, ok := loopFrame(g.Nodes, index, l); ok {
			g.Loops = append(g.Loops, f)
		}
	}
	for _, e := range edges {
		path, bottom := edgePath(g.Nodes[e[0]], g.Nodes[e[1]])
		g.Edges = append(g.Edges, graphEdge{Path: path})
		g.Height = max(g.Height, bottom+graphPad)
	}
	return g
}

// graphEdges are the view's edges as step indexes, without self-loops,
// repeats or unknown ids; a chain in step order when the view has none.
func graphEdges(v View, index map[string]int) [][2]int {
	var out [][2]int
	if len(v.Edges) == 0 {
		for i := 1; i < len(v.Steps); i++ {
			out = append(out, [2]int{i - 1, i})
		}
		return out
	}
	for _, e := range v.Edges {
		from, ok1 := index[e[0]]
		to, ok2 := index[e[1]]
		if !ok1 || !ok2 || from == to || slices.Contains(out, [2]int{from, to}) {
			continue
		}
		out = append(out, [2]int{from, to})
	}
	return out
}

// edgePath is an arrow from the right side of a to the left side of b, or,
// when b is not to the right of a, a loop under both boxes. bottom is the
// lowest y the path reaches.
func edgePath(a, b graphNode) (path string, bottom int) {
	if b.X > a.X {
		x1, y1 := a.X+nodeW, a.Y+nodeH/2
		x2, y2 := b.X-2, b.Y+nodeH/2
		mid := (x1 + x2) / 2
		return fmt.Sprintf("M%d %d C%d %d %d %d %d %d", x1, y1, mid, y1, mid, y2, x2, y2), max(y1, y2)
	}
	x1, y1 := a.X+nodeW/2, a.Y+nodeH
	x2, y2 := b.X+nodeW/2+8, b.Y+nodeH+2
	low := max(y1, y2) + gapY
	return fmt.Sprintf("M%d %d C%d %d %d %d %d %d", x1, y1, x1, low, x2, low, x2, y2), low
}

// loopFrame is the frame around the nodes of loop l's steps; false when none
// of them is drawn.
func loopFrame(nodes []graphNode, index map[string]int, l LoopView) (graphLoop, bool) {
	x1, y1, x2, y2 := -1, -1, -1, -1
	for _, id := range l.Steps {
		i, ok := index[id]
		if !ok {
			continue
		}
		n := nodes[i]
		if x1 < 0 {
			x1, y1, x2, y2 = n.X, n.Y, n.X+n.W, n.Y+n.H
		}
		x1, y1, x2, y2 = min(x1, n.X), min(y1, n.Y), max(x2, n.X+n.W), max(y2, n.Y+n.H)
	}
	if x1 < 0 {
		return graphLoop{}, false
	}
	const pad = 6
	return graphLoop{X: x1 - pad, Y: y1 - loopTop, W: x2 - x1 + 2*pad, H: y2 - y1 + loopTop + pad,
		Label: cut(l.Label, (x2-x1)/7)}, true
}

// cut shortens s to at most n runes, marking the cut with an ellipsis.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
