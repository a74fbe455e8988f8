package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/engine"
)

// benchState is a plan of n steps, the first half done, one running.
func benchState(n int) string {
	var steps, queue, runs []string
	for i := range n {
		id := fmt.Sprintf("s%03d", i)
		steps = append(steps, fmt.Sprintf(`%q: {"title": "Step %d", "instruction": "do %d", "requiredOutputs": ["out/%s.md"]}`, id, i, i, id))
		queue = append(queue, fmt.Sprintf("%q", id))
		switch {
		case i < n/2:
			runs = append(runs, fmt.Sprintf(`%q: {"status": "DONE", "tries": 1, "lastRunIso": "2026-02-10T21:30:00.000000+00:00",
				"stepseq": {"startedIso": "2026-02-10T21:29:00.000000+00:00", "finishedIso": "2026-02-10T21:30:00.000000+00:00"}}`, id))
		case i == n/2:
			runs = append(runs, fmt.Sprintf(`%q: {"status": "IN_PROGRESS", "tries": 1, "lastRunIso": "2026-02-10T21:30:00.000000+00:00",
				"stepseq": {"startedIso": "2026-02-10T21:30:00.000000+00:00"}}`, id))
		}
	}
	return fmt.Sprintf(`{"plan": {"steps": {%s}}, "stepQueue": [%s], "currentStep": %d, "stepRuns": {%s},
		"stepDelayMinutes": 0, "blockers": [], "artifacts": [], "status": "IN_PROGRESS", "stepseq": {"name": "bench"}}`,
		strings.Join(steps, ","), strings.Join(queue, ","), n/2, strings.Join(runs, ","))
}

// BenchmarkStatusView_Print is one report of a 50-step plan with 5 rejected plans
// beside it, as status prints it and status --follow redraws it each second while
// a step runs: the cost of a tick.
func BenchmarkStatusView_Print(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(benchState(50)), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "plans"), 0o755); err != nil {
		b.Fatal(err)
	}
	for i := range 5 {
		if err := os.WriteFile(filepath.Join(dir, "plans", fmt.Sprintf("bad%d.yaml", i)), []byte("name: x\nsteps: []\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	rt, err := engine.NewRuntime(filepath.Join(dir, "state.json"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	rt.Getenv = func(k string) string {
		if k == "STEP_AGENT_CMD" {
			return os.Args[0]
		}
		return ""
	}
	v := &statusView{rt: rt, state: rt.WS.State, plans: filepath.Join(dir, "plans"), out: io.Discard, tty: true, follow: true}
	data, st, err := v.load()
	if err != nil {
		b.Fatal(err)
	}
	now := time.Date(2026, 2, 10, 21, 31, 0, 0, time.UTC)
	b.ResetTimer()
	for b.Loop() {
		if _, err := v.print(data, st, now); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/report")
}
