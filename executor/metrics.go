package executor

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stepseq/stepseq/planspec"
)

// Metrics are the sidecar's Prometheus series, all named stepseq_*.
type Metrics struct {
	steps       *prometheus.GaugeVec
	launches    prometheus.Counter
	failures    prometheus.Counter
	retries     prometheus.Counter
	passes      prometheus.Counter
	gateLatency prometheus.Histogram
}

// NewMetrics registers the sidecar's series on reg. stats reports the watcher's
// counters when scraped.
func NewMetrics(reg prometheus.Registerer, stats func() (events, overflows uint64, watches int)) *Metrics {
	m := &Metrics{
		steps: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stepseq_steps", Help: "Steps of the current plan by status.",
		}, []string{"status"}),
		launches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stepseq_launches_total", Help: "Agent processes launched.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stepseq_failures_total", Help: "Tries that ended FAILED.",
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stepseq_retries_total", Help: "Launches that retried a failed step.",
		}),
		passes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stepseq_reconcile_passes_total", Help: "Reconcile passes run.",
		}),
		gateLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "stepseq_gate_latency_seconds",
			Help:    "From the file event that opened a step to its agent's start.",
			Buckets: []float64{.002, .005, .01, .02, .05, .1, .25, .5, 1, 5},
		}),
	}
	reg.MustRegister(m.steps, m.launches, m.failures, m.retries, m.passes, m.gateLatency)
	if stats != nil {
		reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "stepseq_watcher_events_total", Help: "File events received."},
				func() float64 { e, _, _ := stats(); return float64(e) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "stepseq_watcher_overflows_total", Help: "Event queue overflows, each answered by a rescan."},
				func() float64 { _, o, _ := stats(); return float64(o) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "stepseq_watches", Help: "Directories holding an inotify watch."},
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

func (m *Metrics) observe(st *planspec.State) {
	if m == nil {
		return
	}
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
