package executor

import (
	"bytes"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/stepseq/stepseq/planspec"
)

// TestMetrics_WriteTo: what the sidecar writes is read back by Prometheus's
// own parser of the text format, with the values that were recorded.
func TestMetrics_WriteTo(t *testing.T) {
	m := NewMetrics(func() (uint64, uint64, int) { return 7, 1, 3 })
	m.launched(false)
	m.launched(true)
	m.failed()
	m.pass()
	for _, s := range []float64{0.001, 0.002, 0.003, 0.3, 10} {
		m.gate(s)
	}
	m.observe(&planspec.State{
		StepQueue: []string{"a", "b", "c"},
		StepRuns:  map[string]*planspec.StepRun{"a": {Status: planspec.StatusDone}, "b": {Status: planspec.StatusInProgress}},
	})
	var buf bytes.Buffer
	n, err := m.WriteTo(&buf)
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("WriteTo = %d, %v; wrote %d bytes", n, err, buf.Len())
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(buf.String()))
	if err != nil {
		t.Fatalf("not the text format: %v\n%s", err, buf.String())
	}
	value := func(name string, label ...string) float64 {
		t.Helper()
		f, ok := families[name]
		if !ok {
			t.Fatalf("no %s", name)
		}
		for _, s := range f.GetMetric() {
			if len(label) == 2 && (len(s.GetLabel()) != 1 || s.GetLabel()[0].GetValue() != label[1]) {
				continue
			}
			switch {
			case s.Counter != nil:
				return s.Counter.GetValue()
			case s.Gauge != nil:
				return s.Gauge.GetValue()
			}
		}
		t.Fatalf("no %s %v", name, label)
		return 0
	}
	for _, tc := range []struct {
		name  string
		label []string
		want  float64
	}{
		{"stepseq_launches_total", nil, 2},
		{"stepseq_retries_total", nil, 1},
		{"stepseq_failures_total", nil, 1},
		{"stepseq_reconcile_passes_total", nil, 1},
		{"stepseq_steps", []string{"status", "DONE"}, 1},
		{"stepseq_steps", []string{"status", "PENDING"}, 1},
		{"stepseq_steps", []string{"status", "IN_PROGRESS"}, 1},
		{"stepseq_steps", []string{"status", "FAILED"}, 0},
		{"stepseq_watcher_events_total", nil, 7},
		{"stepseq_watcher_overflows_total", nil, 1},
		{"stepseq_watches", nil, 3},
		{"go_goroutines", nil, -1},
		{"process_cpu_seconds_total", nil, -1},
		{"process_resident_memory_bytes", nil, -1},
	} {
		got := value(tc.name, tc.label...)
		if tc.want >= 0 && got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.label, got, tc.want)
		}
	}
	h := families["stepseq_gate_latency_seconds"].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 5 || h.GetSampleSum() < 10.3 || h.GetSampleSum() > 10.31 {
		t.Errorf("histogram count %d sum %v, want 5 and 10.306", h.GetSampleCount(), h.GetSampleSum())
	}
	want := map[float64]uint64{.002: 2, .005: 3, .25: 3, .5: 4, 5: 4}
	for _, b := range h.GetBucket() {
		if w, ok := want[b.GetUpperBound()]; ok && b.GetCumulativeCount() != w {
			t.Errorf("bucket le=%v holds %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), w)
		}
	}
}
