package web

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLayout_Columns(t *testing.T) {
	steps := func(ids ...string) []StepView {
		var s []StepView
		for _, id := range ids {
			s = append(s, StepView{ID: id})
		}
		return s
	}
	for _, c := range []struct {
		name  string
		v     View
		cols  []int // each step's column
		rows  []int // each step's row in its column
		edges int
	}{
		{"a chain without edges", View{Steps: steps("a", "b", "c")}, []int{0, 1, 2}, []int{0, 0, 0}, 2},
		{"a diamond", View{Steps: steps("a", "b", "c", "d"), Edges: [][2]string{{"a", "b"}, {"a", "c"}, {"b", "d"}, {"c", "d"}}},
			[]int{0, 1, 1, 2}, []int{0, 0, 1, 0}, 4},
		{"a long edge waits for the deepest", View{Steps: steps("a", "b", "c"), Edges: [][2]string{{"a", "c"}, {"a", "b"}, {"b", "c"}}},
			[]int{0, 1, 2}, []int{0, 0, 0}, 3},
		{"unknown ids, self-loops and repeats are left out", View{Steps: steps("a", "b"), Edges: [][2]string{{"a", "zz"}, {"a", "a"}, {"a", "b"}, {"a", "b"}}},
			[]int{0, 1}, []int{0, 0}, 1},
		{"a cycle is broken at its first step", View{Steps: steps("a", "b", "c"), Edges: [][2]string{{"a", "b"}, {"b", "c"}, {"c", "a"}}},
			[]int{0, 1, 2}, []int{0, 0, 0}, 3},
		{"no steps", View{}, nil, nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPage(c.v, time.Now(), 0)
			var cols, rows []int
			for _, n := range p.Graph.Nodes {
				cols = append(cols, (n.X-graphPad)/(nodeW+gapX))
				rows = append(rows, (n.Y-graphPad)/(nodeH+gapY))
			}
			if d := cmp.Diff(c.cols, cols); d != "" {
				t.Errorf("columns (-want +got):\n%s", d)
			}
			if d := cmp.Diff(c.rows, rows); d != "" {
				t.Errorf("rows (-want +got):\n%s", d)
			}
			if len(p.Graph.Edges) != c.edges {
				t.Errorf("%d edges, want %d", len(p.Graph.Edges), c.edges)
			}
			for _, n := range p.Graph.Nodes {
				if n.X+n.W > p.Graph.Width || n.Y+n.H > p.Graph.Height {
					t.Errorf("node %q at %d,%d outside %dx%d", n.ID, n.X, n.Y, p.Graph.Width, p.Graph.Height)
				}
			}
		})
	}
}

func TestLogTail(t *testing.T) {
	for _, c := range []struct {
		name, in string
		limit    int
		want     string
		cut      bool
	}{
		{"plain", "one\ntwo\n", 100, "one\ntwo\n", false},
		{"colours go", "\x1b[1;31merror\x1b[0m: bad\n", 100, "error: bad\n", false},
		{"a progress bar shows its last state", "get 10%\rget 50%\rget 100%\r\ndone\r\n", 100, "get 100%\ndone\n", false},
		{"control characters are marked", "a\x00b\x07c\x7f", 100, "a\uFFFDb\uFFFDc\uFFFD", false},
		{"invalid UTF-8 is marked", "a\xffb", 100, "a\uFFFDb", false},
		{"cut on a line", "first line\nsecond\nthird\n", 12, "third\n", true},
		{"cut in a rune", "ééééé", 5, "éé", true},
		{"a long log is cut before cleaning", strings.Repeat("x\n", 1000) + "last\n", 8, "x\nlast\n", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, cut := logTail(c.in, c.limit)
			if got != c.want || cut != c.cut {
				t.Errorf("logTail(%q, %d) = %q, %v; want %q, %v", c.in, c.limit, got, cut, c.want, c.cut)
			}
		})
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                             "0ms",
		850 * time.Millisecond:        "850ms",
		4200 * time.Millisecond:       "4.2s",
		3*time.Minute + 7*time.Second: "3m07s",
		time.Hour + 2*time.Minute + 5*time.Second: "1h02m",
	} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestPhaseClass(t *testing.T) {
	for phase, want := range map[string]string{
		PhaseDone: "ph-done", PhaseInProgress: "ph-in_progress", "": "ph-unknown", `x" onclick="y`: "ph-unknown",
	} {
		if got := phaseClass(phase); got != want {
			t.Errorf("phaseClass(%q) = %q, want %q", phase, got, want)
		}
	}
}

func TestStripEscapes(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                 "plain",
		"\x1b[1;31mred\x1b[0m":  "red",
		"\x1b[2K\x1b[1Gline":    "line",
		"\x1b]0;title\x07after": "after",
		"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\": "link",
		"a\x1bMb":                   "ab",
		"cut at the end\x1b":        "cut at the end",
		"cut in a CSI\x1b[12":       "cut in a CSI",
		"unterminated OSC\x1b]0;ti": "unterminated OSC",
		"\x1b[31mé\x1b[0m":          "é",
	} {
		if got := stripEscapes(in); got != want {
			t.Errorf("stripEscapes(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLayout_Loop: a repeat group is drawn as a loop: a frame around its steps
// with its label, and its back edge from its last step to its first.
func TestLayout_Loop(t *testing.T) {
	v := View{Steps: []StepView{{ID: "plan"}, {ID: "review"}, {ID: "respond"}, {ID: "resolve"}, {ID: "publish"}},
		Edges: [][2]string{{"plan", "review"}, {"review", "respond"}, {"respond", "resolve"}, {"resolve", "publish"}, {"resolve", "review"}},
		Loops: []LoopView{{Steps: []string{"review", "respond", "resolve"}, Label: "rounds · round 2/5"}}}
	p := newPage(v, time.Now(), 0)
	if len(p.Graph.Loops) != 1 || len(p.Graph.Edges) != 5 {
		t.Fatalf("%d loops and %d edges, want 1 and 5", len(p.Graph.Loops), len(p.Graph.Edges))
	}
	f := p.Graph.Loops[0]
	for i, n := range p.Graph.Nodes {
		inside := n.X >= f.X && n.Y >= f.Y && n.X+n.W <= f.X+f.W && n.Y+n.H <= f.Y+f.H
		if want := i >= 1 && i <= 3; inside != want {
			t.Errorf("step %s inside the loop's frame: %v, want %v", n.StepID, inside, want)
		}
	}
	if f.Y < 0 || f.X < 0 || f.X+f.W > p.Graph.Width {
		t.Errorf("frame %+v outside the graph %dx%d", f, p.Graph.Width, p.Graph.Height)
	}
	html, _, _, err := New(newFakeSource(v), Options{}).fragment(v)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html, `<g class="loop">`) || !strings.Contains(html, "rounds · round 2/5") {
		t.Errorf("the page draws no loop:\n%s", html)
	}
}
