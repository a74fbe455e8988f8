package engine

import (
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
	agents        *metrics.Gauge
	tokens        *metrics.CounterVec
	cost          *metrics.Counter
	// What the step gauges were counted from: the state, its queue's length and
	// each queued step's status, so that a write recounts only the runs it
	// changed, not the plan.
	seen     *planspec.State
	queueLen int
	status   map[string]string
	counts   map[string]float64
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
	m.agents = metrics.NewGauge(metrics.Opts{
		Name: "stepseq_running_agents", Help: "Agent processes running now, across the sidecar's runs (steps side by side count each, and so does an agent a stepseq before it left running, while the sidecar waits for it).",
	})
	m.tokens = metrics.NewCounterVec(metrics.Opts{
		Name: "stepseq_agent_tokens_total", Help: "Tokens the agents' tries spent, as their output or reports said, by kind (input, output, cache).",
	}, []string{"kind"})
	m.cost = metrics.NewCounter(metrics.Opts{
		Name: "stepseq_agent_cost_usd_total", Help: "Cost in USD of the agents' tries, as their output or reports said; tries that named none are not in it.",
	})
	for _, kind := range []string{"input", "output", "cache"} {
		m.tokens.WithLabelValues(kind) // every kind is scraped from the start, at 0
	}
	reg.MustRegister(m.steps, m.launches, m.failures, m.retries, m.passes, m.gateLatency,
		m.plan, m.blocked, m.stepDuration, m.invalidStates, m.rejectedPlans, m.agents, m.tokens, m.cost)
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

// runningAgents sets how many agent processes run now.
func (m *Metrics) runningAgents(n int) {
	if m != nil {
		m.agents.Set(float64(n))
	}
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

// verdict counts a try's verdict: its duration under its outcome, and a
// failure. Every judged try is timed, a failed one that is retried at once
// too: its FAILED record never reaches a state file of its own (the retry's
// launch is written with it), so the verdict, not the state, is the measure.
func (m *Metrics) verdict(ok bool, seconds float64, timed bool) {
	if m == nil {
		return
	}
	outcome := "done"
	if !ok {
		outcome = "failed"
		m.failures.Inc()
	}
	if timed {
		m.stepDuration.WithLabelValues(outcome).Observe(seconds)
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

// stepStatuses are the stepseq_steps labels.
var stepStatuses = []string{planspec.StatusPending, planspec.StatusInProgress, planspec.StatusDone, planspec.StatusFailed}

// observe follows the state after a turn of the loop: a state not seen before
// (read from the file, a new plan) is counted whole; the one already counted
// costs only its plan-wide gauges, since written follows its writes.
func (m *Metrics) observe(st *planspec.State) {
	if m == nil {
		return
	}
	if m.stale(st) {
		m.recount(st)
		return
	}
	m.observePlan(st)
}

// stale says whether st is not the state counted, or its queue changed.
func (m *Metrics) stale(st *planspec.State) bool {
	return st == nil || st != m.seen || len(st.StepQueue) != m.queueLen
}

// Written follows a write of st that changed the runs of ids (all: anything may
// have changed), as planspec.State.Touched told before the write.
func (m *Metrics) written(st *planspec.State, ids []string, all bool) {
	if m == nil {
		return
	}
	if all || m.stale(st) {
		m.recount(st)
		return
	}
	m.observePlan(st)
	for _, id := range ids {
		if _, queued := m.status[id]; queued {
			m.update(id, st.StepRuns[id])
		}
	}
	m.setSteps()
}

// recount counts every queued step of st again.
func (m *Metrics) recount(st *planspec.State) {
	m.seen, m.queueLen = st, 0
	m.status, m.counts = map[string]string{}, map[string]float64{}
	m.observePlan(st)
	if st != nil {
		m.queueLen = len(st.StepQueue)
		for _, id := range st.StepQueue {
			m.update(id, st.StepRuns[id])
		}
	}
	m.setSteps()
}

// update counts step id under its run's status.
func (m *Metrics) update(id string, run *planspec.StepRun) {
	status := planspec.StatusPending
	if run != nil {
		status = run.Status
	}
	if old, ok := m.status[id]; !ok || old != status {
		if ok {
			m.counts[old]--
		}
		m.counts[status]++
		m.status[id] = status
	}
}

func (m *Metrics) setSteps() {
	for _, status := range stepStatuses {
		m.steps.WithLabelValues(status).Set(m.counts[status])
	}
}

// observePlan sets the plan's status and blocked-step gauges.
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
	blocked := 0.0
	if st != nil {
		blocked = float64(len(st.Blockers))
	}
	m.blocked.Set(blocked)
}
