package engine

import (
	"bytes"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/stepseq/stepseq/executor/metrics"
	"github.com/stepseq/stepseq/planspec"
)

// TestMetrics_Observe: the plan's status and blocked steps are gauges; a try is
// timed at its verdict, by outcome, and never from the states written.
func TestMetrics_Observe(t *testing.T) {
	reg := metrics.NewRegistry()
	m := NewMetrics(reg, nil)
	run := func(status, started, finished string) string {
		return `{"status": "` + status + `", "tries": 1, "stepseq": {"startedIso": "` + started + `", "finishedIso": "` + finished + `"}}`
	}
	state := func(runs, blockers, status string) string {
		return `{"plan": {"steps": {"a": {"title": "A", "instruction": "x"}, "b": {"title": "B", "instruction": "y"}}},
			"stepQueue": ["a", "b"], "currentStep": 0, "stepDelayMinutes": 0, "artifacts": [],
			"stepRuns": {` + runs + `}, "blockers": [` + blockers + `], "status": "` + status + `"}`
	}
	m.observe(parse(t, state(`"a": `+run("DONE", "2026-02-10T12:00:00+00:00", "2026-02-10T12:00:30+00:00"), ``, "IN_PROGRESS")))
	// b fails after 90 s and is blocked.
	m.observe(parse(t, state(`"a": `+run("DONE", "2026-02-10T12:00:00+00:00", "2026-02-10T12:00:30+00:00")+`,
		"b": `+run("FAILED", "2026-02-10T12:01:00+00:00", "2026-02-10T12:02:30+00:00"), `"b: max retries (1) exceeded"`, "IN_PROGRESS")))
	// The same state again: nothing timed twice.
	m.observe(parse(t, state(`"a": `+run("DONE", "2026-02-10T12:00:00+00:00", "2026-02-10T12:00:30+00:00")+`,
		"b": `+run("FAILED", "2026-02-10T12:01:00+00:00", "2026-02-10T12:02:30+00:00"), `"b: max retries (1) exceeded"`, "IN_PROGRESS")))
	// Tries are timed at their verdicts: b's failure after 90 s.
	m.verdict(false, 90, true)
	m.InvalidState()
	m.RejectedPlan()
	m.RejectedPlan()

	var scrape bytes.Buffer
	if err := reg.WriteText(&scrape); err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(&scrape)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	var timed uint64
	var sum float64
	for _, mf := range mfs {
		for _, mm := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range mm.GetLabel() {
				name += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			switch {
			case mm.GetGauge() != nil:
				got[name] = mm.GetGauge().GetValue()
			case mm.GetCounter() != nil:
				got[name] = mm.GetCounter().GetValue()
			case mm.GetHistogram() != nil && mf.GetName() == "stepseq_step_duration_seconds":
				if name != "stepseq_step_duration_seconds{outcome=failed}" {
					t.Errorf("a try timed as %s, want failed", name)
				}
				timed += mm.GetHistogram().GetSampleCount()
				sum += mm.GetHistogram().GetSampleSum()
			}
		}
	}
	for name, want := range map[string]float64{
		"stepseq_blocked_steps":                   1,
		"stepseq_invalid_states_total":            1,
		"stepseq_rejected_plans_total":            2,
		"stepseq_plan_status{status=blocked}":     1,
		"stepseq_plan_status{status=done}":        0,
		"stepseq_plan_status{status=in_progress}": 0,
		"stepseq_plan_status{status=none}":        0,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	if timed != 1 || sum != 90 {
		t.Errorf("%d tries timed, %v s in all; want 1, 90 s: b's failure, once", timed, sum)
	}
}

// TestMetrics_Written: a write recounts only the runs it changed, and the
// counts stay those of a whole recount; a turn without a write changes nothing.
func TestMetrics_Written(t *testing.T) {
	reg := metrics.NewRegistry()
	m := NewMetrics(reg, nil)
	st := parse(t, `{"plan": {"steps": {"a": {"title": "A", "instruction": "x"}, "b": {"title": "B", "instruction": "y"}}},
		"stepQueue": ["a", "b"], "currentStep": 0, "stepDelayMinutes": 0, "artifacts": [],
		"stepRuns": {}, "blockers": [], "status": "IN_PROGRESS"}`)
	st.Track()
	st.Marshal()
	steps := func(status string) float64 { v, _ := reg.Value("stepseq_steps", status); return v }
	write := func() {
		t.Helper()
		ids, all := st.Touched()
		if all {
			t.Fatal("the state asks for a whole recount")
		}
		st.Marshal()
		m.written(st, ids, all)
	}
	m.observe(st)
	if steps(planspec.StatusPending) != 2 {
		t.Fatalf("pending = %v, want 2", steps(planspec.StatusPending))
	}

	r := st.Run("a")
	r.Status, r.Tries = planspec.StatusInProgress, 1
	r.Agent = &planspec.AgentRecord{StartedIso: "2026-02-10T12:00:00+00:00"}
	write()
	m.observe(st) // the turn ends
	if steps(planspec.StatusPending) != 1 || steps(planspec.StatusInProgress) != 1 {
		t.Fatalf("pending %v, in progress %v; want 1 and 1", steps(planspec.StatusPending), steps(planspec.StatusInProgress))
	}

	r = st.Run("a")
	r.Status, r.Agent.FinishedIso = planspec.StatusDone, "2026-02-10T12:00:40+00:00"
	write()
	if steps(planspec.StatusDone) != 1 || steps(planspec.StatusInProgress) != 0 {
		t.Fatalf("done %v, in progress %v; want 1 and 0", steps(planspec.StatusDone), steps(planspec.StatusInProgress))
	}
	var scrape bytes.Buffer
	if err := reg.WriteText(&scrape); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(scrape.Bytes(), []byte(`stepseq_step_duration_seconds_count{outcome="done"} 1`)) {
		t.Errorf("a try was timed from a state written, not its verdict:\n%s", scrape.String())
	}

	// The same counts as a whole recount of the state.
	whole := NewMetrics(metrics.NewRegistry(), nil)
	whole.observe(st)
	for _, status := range stepStatuses {
		if whole.counts[status] != m.counts[status] {
			t.Errorf("%s: %v after writes, %v recounted", status, m.counts[status], whole.counts[status])
		}
	}
}

// BenchmarkMetrics_Observe: what the gauges cost per state write under
// watch --listen, on a 5,000-step plan half done: 1,000 writes per round, each
// a try starting at the cursor, timed without the writes' encoding.
func BenchmarkMetrics_Observe(b *testing.B) {
	st, err := planspec.ParseStateBytes(halfDone(5000, false), "state.json")
	if err != nil {
		b.Fatal(err)
	}
	st.Track()
	buf := st.AppendMarshal(nil)
	m := NewMetrics(metrics.NewRegistry(), nil)
	m.observe(st)
	id := st.StepQueue[st.CurrentStep]
	const writes = 1000
	var spent time.Duration
	for b.Loop() {
		for range writes {
			st.Run(id).Tries++
			ids, all := st.Touched()
			buf = st.AppendMarshal(buf[:0]) // the write, not the metrics' cost
			began := time.Now()
			m.written(st, ids, all)
			m.observe(st) // the turn ends
			spent += time.Since(began)
		}
	}
	b.ReportMetric(float64(spent.Nanoseconds())/1e3/float64(b.N*writes), "µs/write")
}
