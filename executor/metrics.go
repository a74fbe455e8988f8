package executor

import (
	"time"

	"github.com/stepseq/stepseq/executor/metrics"
	"github.com/stepseq/stepseq/planspec"
)

// Metrics are the sidecar's Prometheus series, all named stepseq_*.
type Metrics struct {
	steps       *metrics.GaugeVec
	launches    *metrics.Counter
	failures    *metrics.Counter
	retries     *metrics.Counter
	passes      *metrics.Counter
	gateLatency *metrics.Histogram

	plan          *metrics.GaugeVec
	blocked       *metrics.Gauge
	stepDuration  *metrics.HistogramVec
	invalidStates *metrics.Counter
	rejectedPlans *metrics.Counter
	// timed holds, by step, the end of the last try whose duration went into
	// stepDuration; nil until the first state seen, whose finished tries are
	// history, not news.
	timed map[string]string
}

// NewMetrics registers the sidecar's series on reg. stats reports the watcher's
// counters when scraped.
func NewMetrics(reg *metrics.Registry, stats func() (events, overflows uint64, watches int)) *Metrics {
	m := &Metrics{
		steps: metrics.NewGaugeVec(metrics.Opts{
			Name: "stepseq_steps", Help: "Steps of the current plan by status.",
		}, []string{"status"}),
		launches: metrics.NewCounter(metrics.Opts{
			Name: "stepseq_launches_total", Help: "Agent processes launched.",
		}),
		failures: metrics.NewCounter(metrics.Opts{
			Name: "stepseq_failures_total", Help: "Tries that ended FAILED.",
		}),
		retries: metrics.NewCounter(metrics.Opts{
			Name: "stepseq_retries_total", Help: "Launches that retried a failed step.",
		}),
		passes: metrics.NewCounter(metrics.Opts{
			Name: "stepseq_reconcile_passes_total", Help: "Reconcile passes run.",
		}),
		gateLatency: metrics.NewHistogram(metrics.HistogramOpts{
			Name:    "stepseq_gate_latency_seconds",
			Help:    "From the file event that opened a step to its agent's start.",
			Buckets: []float64{.002, .005, .01, .02, .05, .1, .25, .5, 1, 5},
		}),
	}
	// Labels stay bounded: a status word or an outcome, never a step id.
	m.plan = metrics.NewGaugeVec(metrics.Opts{
		Name: "stepseq_plan_status", Help: "1 for the current plan's status (in_progress, blocked, done, none), 0 for the others.",
	}, []string{"status"})
	m.blocked = metrics.NewGauge(metrics.Opts{
		Name: "stepseq_blocked_steps", Help: "Steps of the current plan out of retries (its blockers).",
	})
	m.stepDuration = metrics.NewHistogramVec(metrics.HistogramOpts{
		Name:    "stepseq_step_duration_seconds",
		Help:    "How long each try's agent ran, by the try's outcome (done or failed).",
		Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200},
	}, []string{"outcome"})
	m.invalidStates = metrics.NewCounter(metrics.Opts{
		Name: "stepseq_invalid_states_total", Help: "Reads of state.json that did not parse or validate.",
	})
	m.rejectedPlans = metrics.NewCounter(metrics.Opts{
		Name: "stepseq_rejected_plans_total", Help: "Plan files judged invalid.",
	})
	reg.MustRegister(m.steps, m.launches, m.failures, m.retries, m.passes, m.gateLatency,
		m.plan, m.blocked, m.stepDuration, m.invalidStates, m.rejectedPlans)
	if stats != nil {
		reg.MustRegister(
			metrics.NewCounterFunc(metrics.Opts{Name: "stepseq_watcher_events_total", Help: "File events received."},
				func() float64 { e, _, _ := stats(); return float64(e) }),
			metrics.NewCounterFunc(metrics.Opts{Name: "stepseq_watcher_overflows_total", Help: "Event queue overflows, each answered by a rescan."},
				func() float64 { _, o, _ := stats(); return float64(o) }),
			metrics.NewGaugeFunc(metrics.Opts{Name: "stepseq_watches", Help: "Directories holding an inotify watch."},
				func() float64 { _, _, w := stats(); return float64(w) }),
		)
	}
	return m
}

func (m *Metrics) launched(retry bool) {
	if m == nil {
		return
	}
	m.launches.Inc()
	if retry {
		m.retries.Inc()
	}
}

func (m *Metrics) failed() {
	if m != nil {
		m.failures.Inc()
	}
}

func (m *Metrics) pass() {
	if m != nil {
		m.passes.Inc()
	}
}

func (m *Metrics) gate(seconds float64) {
	if m != nil {
		m.gateLatency.Observe(seconds)
	}
}

// InvalidState counts a read of state.json that did not parse or validate.
func (m *Metrics) InvalidState() {
	if m != nil {
		m.invalidStates.Inc()
	}
}

// RejectedPlan counts a plan file judged invalid.
func (m *Metrics) RejectedPlan() {
	if m != nil {
		m.rejectedPlans.Inc()
	}
}

// Plan statuses as stepseq_plan_status labels them.
var planStatusLabels = []string{"in_progress", "blocked", "done", "none"}

// observePlan sets the plan's status and blocked-step gauges, and puts the
// duration of every try that finished since the last state seen into the
// histogram.
func (m *Metrics) observePlan(st *planspec.State) {
	status := "none"
	switch {
	case st == nil:
	case st.Status == planspec.StatusDone:
		status = "done"
	case len(st.Blockers) > 0:
		status = "blocked"
	default:
		status = "in_progress"
	}
	for _, l := range planStatusLabels {
		v := 0.0
		if l == status {
			v = 1
		}
		m.plan.WithLabelValues(l).Set(v)
	}
	if st == nil {
		m.blocked.Set(0)
		return
	}
	m.blocked.Set(float64(len(st.Blockers)))
	first := m.timed == nil
	if first {
		m.timed = map[string]string{}
	}
	for id, run := range st.StepRuns {
		if run.Agent == nil || run.Agent.FinishedIso == "" || m.timed[id] == run.Agent.FinishedIso {
			continue
		}
		m.timed[id] = run.Agent.FinishedIso
		if first {
			continue
		}
		d, _, ok := runDuration(run, time.Time{})
		if !ok {
			continue
		}
		outcome := "done"
		if run.Status != planspec.StatusDone {
			outcome = "failed"
		}
		m.stepDuration.WithLabelValues(outcome).Observe(d.Seconds())
	}
}

func (m *Metrics) observe(st *planspec.State) {
	if m == nil {
		return
	}
	m.observePlan(st)
	counts := map[string]float64{planspec.StatusPending: 0, planspec.StatusInProgress: 0, planspec.StatusDone: 0, planspec.StatusFailed: 0}
	if st != nil {
		for _, id := range st.StepQueue {
			status := planspec.StatusPending
			if run, ok := st.StepRuns[id]; ok {
				status = run.Status
			}
			counts[status]++
		}
	}
	for status, n := range counts {
		m.steps.WithLabelValues(status).Set(n)
	}
}
