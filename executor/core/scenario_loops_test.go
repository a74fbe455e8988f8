package core

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// scenarioLoops are the scenario commands for long loops: rounds feeds many
// exits at once, and loops shows where each loop stands. crash, a new machine
// on what the last write left on disk, as a restart after a crash does, is
// one of start's.
var scenarioLoops = map[string]func(s *scenario, t *testing.T, d *datadriven.TestData, verbose bool) string{
	"rounds": (*scenario).rounds,
	"loops":  func(s *scenario, _ *testing.T, _ *datadriven.TestData, _ bool) string { return s.loops() },
}

// rounds answers n rounds of a loop: each line of the input, "STEP JSON", is
// that step's exit with its result, ${round} replaced by the round it runs in.
func (s *scenario) rounds(t *testing.T, d *datadriven.TestData, verbose bool) string {
	n := 0
	d.ScanArgs(t, "n", &n)
	var lines [][2]string
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		step, result, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			d.Fatalf(t, "want STEP JSON, got %q", line)
		}
		lines = append(lines, [2]string{step, result})
	}
	out, exits := "", 0
	for range n {
		for _, l := range lines {
			g, _ := s.m.State().GroupOf(l[0])
			if g == nil || s.m.State().Loop(g.ID) == nil {
				d.Fatalf(t, "step %s is in no loop under way", l[0])
			}
			round := s.m.State().Loop(g.ID).Round
			result := strings.ReplaceAll(l[1], "${round}", fmt.Sprint(round))
			out = s.feed(AgentExited{Step: l[0], Try: s.running[l[0]], Result: json.RawMessage(result),
				Exit: Exit{Started: s.started[l[0]], Ended: s.now}}, verbose)
			exits++
		}
	}
	return fmt.Sprintf("(%d exits; the last one's effects:)\n%s", exits, out)
}

// loops is where each loop stands, and the summary the plan's end kept.
func (s *scenario) loops() string {
	var b strings.Builder
	st := s.m.State()
	for _, g := range st.Settings.Groups {
		l := st.Loop(g.ID)
		if l == nil {
			fmt.Fprintf(&b, "loop %s: not started\n", g.ID)
			continue
		}
		fmt.Fprintf(&b, "loop %s: round %d/%d ended=%q kept=%d dropped=%d", g.ID, l.Round, l.Max, l.Ended, len(l.Rounds), l.Dropped)
		if len(l.Rounds) > 0 {
			first := l.Dropped + 1
			fmt.Fprintf(&b, " (rounds %d-%d)", first, first+len(l.Rounds)-1)
		}
		b.WriteString("\n")
		for _, name := range slices.Sorted(maps.Keys(l.Totals)) {
			v, _ := json.Marshal(l.Totals[name])
			fmt.Fprintf(&b, "  totals.%s = %s\n", name, v)
		}
	}
	if sv := st.Settings.SummaryValues; sv != nil {
		for _, name := range slices.Sorted(maps.Keys(sv)) {
			v, _ := json.Marshal(sv[name])
			fmt.Fprintf(&b, "summary.%s = %s\n", name, v)
		}
	}
	return b.String()
}
