package engine

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/metrics"
	"github.com/stepseq/stepseq/planspec"
)

// TestSidecar_ScrapeAfterDoneCountsEveryTry: a scrape begun once the state on
// disk says DONE counts every try that led there, and no agent still running.
// The loop is held in the turn that wrote DONE, after the write and before the
// turn ends: a count kept up at the turn's end is not there yet.
func TestSidecar_ScrapeAfterDoneCountsEveryTry(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"failfirst:marker write:out","requiredOutputs":["out"]`))
	reg := metrics.NewRegistry()
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	// Not waiting for the sidecar to be ready: the plan may end, and the loop
	// be held, before it is.
	w.runSidecar(SidecarOptions{Metrics: NewMetrics(reg, nil), OnChange: func() {
		// On the loop, after each write that succeeded.
		if v, _ := reg.Value("stepseq_plan_status", "done"); v == 1 {
			once.Do(func() { close(held); <-release })
		}
	}})
	defer close(release) // before the sidecar's stop, which waits for the loop
	select {
	case <-held:
	case <-time.After(effectWait):
		t.Fatalf("the plan never ended: %+v", w.read().StepRuns)
	}
	if st := w.read(); st.Status != planspec.StatusDone {
		t.Fatalf("the state on disk is %s, want DONE", st.Status)
	}
	var scrape bytes.Buffer
	if err := reg.WriteText(&scrape); err != nil {
		t.Fatal(err)
	}
	for _, series := range []string{"stepseq_launches_total 2", "stepseq_retries_total 1", "stepseq_failures_total 1",
		`stepseq_step_duration_seconds_count{outcome="failed"} 1`, `stepseq_step_duration_seconds_count{outcome="done"} 1`,
		`stepseq_steps{status="DONE"} 1`, "stepseq_running_agents 0"} {
		if !strings.Contains(scrape.String(), series+"\n") {
			t.Errorf("the scrape lacks %s", series)
		}
	}
	if t.Failed() {
		t.Logf("the scrape:\n%s", scrape.String())
	}
}
