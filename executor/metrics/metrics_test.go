package metrics

import (
	"bytes"
	"errors"
	"math"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape writes reg and parses it back with Prometheus's own text parser.
func scrape(t *testing.T, reg *Registry) (string, map[string]*dto.MetricFamily) {
	t.Helper()
	var buf bytes.Buffer
	if err := reg.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("Prometheus's parser refuses the scrape: %v\n%s", err, buf.String())
	}
	return buf.String(), mfs
}

// TestRegistry_Exposition: every kind of series, escaped labels and help, in
// the text format exactly, and read back the same by Prometheus's parser.
func TestRegistry_Exposition(t *testing.T) {
	reg := NewRegistry()
	c := NewCounter(Opts{Name: "t_events_total", Help: "Events.\nSecond line with a \\."})
	g := NewGauge(Opts{Name: "t_level", Help: "Level."})
	cv := NewCounterVec(Opts{Name: "t_sent_total", Help: "Sent, by sink."}, []string{"sink"})
	gv := NewGaugeVec(Opts{Name: "t_steps", Help: "Steps by status."}, []string{"status", "plan"})
	h := NewHistogram(HistogramOpts{Name: "t_latency_seconds", Help: "Latency.", Buckets: []float64{.005, .1, 1}})
	hv := NewHistogramVec(HistogramOpts{Name: "t_duration_seconds", Help: "Duration.", Buckets: []float64{1, 10}}, []string{"outcome"})
	reg.MustRegister(c, g, cv, gv, h, hv,
		NewCounterFunc(Opts{Name: "t_read_total", Help: "Read."}, func() float64 { return 7 }),
		NewGaugeFunc(Opts{Name: "t_watches", Help: "Watches."}, func() float64 { return 3 }))

	c.Inc()
	c.Add(2.5)
	g.Set(4)
	g.Add(-1.5)
	cv.WithLabelValues("webhook").Inc()
	cv.WithLabelValues("command").Add(2)
	gv.WithLabelValues("done", `a "quoted"\plan`+"\n").Set(1)
	gv.WithLabelValues("blocked", "p").Set(0)
	for _, v := range []float64{.001, .005, .05, 2, math.Inf(1)} {
		h.Observe(v)
	}
	hv.WithLabelValues("failed").Observe(90)
	hv.WithLabelValues("done").Observe(0.5)

	text, mfs := scrape(t, reg)
	want := `# HELP t_duration_seconds Duration.
# TYPE t_duration_seconds histogram
t_duration_seconds_bucket{outcome="done",le="1"} 1
t_duration_seconds_bucket{outcome="done",le="10"} 1
t_duration_seconds_bucket{outcome="done",le="+Inf"} 1
t_duration_seconds_sum{outcome="done"} 0.5
t_duration_seconds_count{outcome="done"} 1
t_duration_seconds_bucket{outcome="failed",le="1"} 0
t_duration_seconds_bucket{outcome="failed",le="10"} 0
t_duration_seconds_bucket{outcome="failed",le="+Inf"} 1
t_duration_seconds_sum{outcome="failed"} 90
t_duration_seconds_count{outcome="failed"} 1
# HELP t_events_total Events.\nSecond line with a \\.
# TYPE t_events_total counter
t_events_total 3.5
# HELP t_latency_seconds Latency.
# TYPE t_latency_seconds histogram
t_latency_seconds_bucket{le="0.005"} 2
t_latency_seconds_bucket{le="0.1"} 3
t_latency_seconds_bucket{le="1"} 3
t_latency_seconds_bucket{le="+Inf"} 5
t_latency_seconds_sum +Inf
t_latency_seconds_count 5
# HELP t_level Level.
# TYPE t_level gauge
t_level 2.5
# HELP t_read_total Read.
# TYPE t_read_total counter
t_read_total 7
# HELP t_sent_total Sent, by sink.
# TYPE t_sent_total counter
t_sent_total{sink="command"} 2
t_sent_total{sink="webhook"} 1
# HELP t_steps Steps by status.
# TYPE t_steps gauge
t_steps{status="blocked",plan="p"} 0
t_steps{status="done",plan="a \"quoted\"\\plan\n"} 1
# HELP t_watches Watches.
# TYPE t_watches gauge
t_watches 3
`
	if text != want {
		t.Errorf("scrape:\n%s\nwant:\n%s", text, want)
	}
	if got := mfs["t_steps"].GetMetric()[1].GetLabel()[1].GetValue(); got != `a "quoted"\plan`+"\n" {
		t.Errorf("label read back as %q", got)
	}
	if got := mfs["t_events_total"].GetHelp(); got != "Events.\nSecond line with a \\." {
		t.Errorf("help read back as %q", got)
	}
	if got := mfs["t_latency_seconds"].GetMetric()[0].GetHistogram().GetSampleCount(); got != 5 {
		t.Errorf("histogram count read back as %d", got)
	}

	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
		ok     bool
	}{
		{"t_events_total", nil, 3.5, true},
		{"t_level", nil, 2.5, true},
		{"t_sent_total", []string{"command"}, 2, true},
		{"t_sent_total", []string{"slack"}, 0, false},
		{"t_read_total", nil, 7, true},
		{"t_nothing", nil, 0, false},
	} {
		if got, ok := reg.Value(tc.name, tc.labels...); got != tc.want || ok != tc.ok {
			t.Errorf("Value(%s, %v) = %v, %v; want %v, %v", tc.name, tc.labels, got, ok, tc.want, tc.ok)
		}
	}
}

// TestRegistry_Register: a name is registered once; Registered hands back the
// collector that holds it, so a part made again counts on.
func TestRegistry_Register(t *testing.T) {
	reg := NewRegistry()
	first := NewCounterVec(Opts{Name: "t_total", Help: "T."}, []string{"sink"})
	if got := Registered(reg, first); got != first {
		t.Fatal("the first registration did not return its collector")
	}
	first.WithLabelValues("a").Inc()
	again := Registered(reg, NewCounterVec(Opts{Name: "t_total", Help: "T."}, []string{"sink"}))
	if again != first {
		t.Fatal("a second registration did not return the first collector")
	}
	var are AlreadyRegisteredError
	if err := reg.Register(NewCounter(Opts{Name: "t_total"})); !errors.As(err, &are) || are.Existing != first {
		t.Errorf("Register of a taken name: %v", err)
	}
	if err := reg.Register(NewCounter(Opts{Name: "9lives"})); err == nil || !strings.Contains(err.Error(), "9lives") {
		t.Errorf("Register of a bad name: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("MustRegister of a taken name did not panic")
		}
	}()
	reg.MustRegister(NewGauge(Opts{Name: "t_total"}))
}

// TestCounter_Concurrent: increments from many goroutines are all counted.
func TestCounter_Concurrent(t *testing.T) {
	c := NewCounter(Opts{Name: "t_total"})
	cv := NewCounterVec(Opts{Name: "t_vec_total"}, []string{"k"})
	h := NewHistogram(HistogramOpts{Name: "t_h", Buckets: []float64{1}})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				c.Inc()
				cv.WithLabelValues("x").Inc()
				h.Observe(0.5)
			}
		})
	}
	wg.Wait()
	reg := NewRegistry()
	reg.MustRegister(c, cv, h)
	_, mfs := scrape(t, reg)
	if got := mfs["t_total"].GetMetric()[0].GetCounter().GetValue(); got != 8000 {
		t.Errorf("counter = %v, want 8000", got)
	}
	if got := mfs["t_vec_total"].GetMetric()[0].GetCounter().GetValue(); got != 8000 {
		t.Errorf("labelled counter = %v, want 8000", got)
	}
	if got := mfs["t_h"].GetMetric()[0].GetHistogram().GetSampleCount(); got != 8000 {
		t.Errorf("histogram count = %v, want 8000", got)
	}
}

// TestStandard: the process's and the runtime's series have the names and
// plausible values Prometheus's client gives them, and the handler serves them.
func TestStandard(t *testing.T) {
	reg := NewRegistry()
	reg.MustRegister(Standard()...)
	rec := httptest.NewRecorder()
	reg.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if ct := rec.Header().Get("Content-Type"); ct != ContentType {
		t.Errorf("Content-Type %q", ct)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	value := func(name string) float64 {
		mf, ok := mfs[name]
		if !ok {
			t.Errorf("no %s", name)
			return 0
		}
		m := mf.GetMetric()[0]
		if m.GetCounter() != nil {
			return m.GetCounter().GetValue()
		}
		return m.GetGauge().GetValue()
	}
	if v := value("go_goroutines"); v < 1 {
		t.Errorf("go_goroutines = %v", v)
	}
	if v := value("go_memstats_heap_alloc_bytes"); v <= 0 {
		t.Errorf("go_memstats_heap_alloc_bytes = %v", v)
	}
	if v := value("process_cpu_seconds_total"); v <= 0 {
		t.Errorf("process_cpu_seconds_total = %v", v)
	}
	if v := value("go_info"); v != 1 {
		t.Errorf("go_info = %v", v)
	}
	if _, err := os.Stat("/proc/self/statm"); err != nil {
		return // the rest come from /proc
	}
	if v := value("process_resident_memory_bytes"); v < 1<<20 {
		t.Errorf("process_resident_memory_bytes = %v", v)
	}
	if v := value("process_open_fds"); v < 3 || v > value("process_max_fds") {
		t.Errorf("process_open_fds = %v", v)
	}
	// This process started after boot and before now.
	if v := value("process_start_time_seconds"); v < 1e9 || v > float64(time.Now().Unix()+1) {
		t.Errorf("process_start_time_seconds = %v", v)
	}
}
