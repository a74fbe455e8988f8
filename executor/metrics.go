package executor

import (
	"bufio"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stepseq/stepseq/planspec"
)

// Metrics are the sidecar's Prometheus series, all named stepseq_*, with the
// usual go_* and process_* ones beside them. They are written in the
// Prometheus text format by hand: the client library's packages initialise
// protobuf descriptors at start-up, a cost every command would pay (it was
// most of the binary's start-up) for a page only `watch --listen` serves.
type Metrics struct {
	stats func() (events, overflows uint64, watches int)
	start time.Time

	launches, failures, retries, passes atomic.Uint64

	mu    sync.Mutex
	steps map[string]float64 // by status
	gates histogram
}

// gateBuckets are the upper bounds of stepseq_gate_latency_seconds, in seconds.
var gateBuckets = []float64{.002, .005, .01, .02, .05, .1, .25, .5, 1, 5}

type histogram struct {
	counts []uint64 // per bucket, not cumulative
	sum    float64
	n      uint64
}

// NewMetrics makes the sidecar's series. stats, when not nil, reports the
// watcher's counters when the series are written.
func NewMetrics(stats func() (events, overflows uint64, watches int)) *Metrics {
	m := &Metrics{stats: stats, start: time.Now(), gates: histogram{counts: make([]uint64, len(gateBuckets))}}
	m.observe(nil)
	return m
}

func (m *Metrics) launched(retry bool) {
	if m == nil {
		return
	}
	m.launches.Add(1)
	if retry {
		m.retries.Add(1)
	}
}

func (m *Metrics) failed() {
	if m != nil {
		m.failures.Add(1)
	}
}

func (m *Metrics) pass() {
	if m != nil {
		m.passes.Add(1)
	}
}

func (m *Metrics) gate(seconds float64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if i, _ := slices.BinarySearch(gateBuckets, seconds); i < len(gateBuckets) {
		m.gates.counts[i]++
	}
	m.gates.sum += seconds
	m.gates.n++
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
	m.mu.Lock()
	defer m.mu.Unlock()
	m.steps = counts
}

// ContentType is the media type of what WriteTo writes.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// WriteTo writes every series in the Prometheus text format.
func (m *Metrics) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	e := exposition{bufio.NewWriter(cw)}

	m.mu.Lock()
	statuses := make([]string, 0, len(m.steps))
	for s := range m.steps {
		statuses = append(statuses, s)
	}
	slices.Sort(statuses)
	e.family("stepseq_steps", "gauge", "Steps of the current plan by status.")
	for _, s := range statuses {
		e.sample("stepseq_steps", `status="`+s+`"`, m.steps[s])
	}
	gates := histogram{counts: slices.Clone(m.gates.counts), sum: m.gates.sum, n: m.gates.n}
	m.mu.Unlock()

	e.counter("stepseq_launches_total", "Agent processes launched.", m.launches.Load())
	e.counter("stepseq_failures_total", "Tries that ended FAILED.", m.failures.Load())
	e.counter("stepseq_retries_total", "Launches that retried a failed step.", m.retries.Load())
	e.counter("stepseq_reconcile_passes_total", "Reconcile passes run.", m.passes.Load())

	const gate = "stepseq_gate_latency_seconds"
	e.family(gate, "histogram", "From the file event that opened a step to its agent's start.")
	var cum uint64
	for i, le := range gateBuckets {
		cum += gates.counts[i]
		e.sample(gate+"_bucket", `le="`+formatFloat(le)+`"`, float64(cum))
	}
	e.sample(gate+"_bucket", `le="+Inf"`, float64(gates.n))
	e.sample(gate+"_sum", "", gates.sum)
	e.sample(gate+"_count", "", float64(gates.n))

	if m.stats != nil {
		events, overflows, watches := m.stats()
		e.counter("stepseq_watcher_events_total", "File events received.", events)
		e.counter("stepseq_watcher_overflows_total", "Event queue overflows, each answered by a rescan.", overflows)
		e.family("stepseq_watches", "gauge", "Directories holding an inotify watch.")
		e.sample("stepseq_watches", "", float64(watches))
	}
	m.writeRuntime(e)
	err := e.w.Flush()
	return cw.n, err
}

// writeRuntime writes the Go runtime's and the process's usual series.
func (m *Metrics) writeRuntime(e exposition) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	e.family("go_info", "gauge", "Information about the Go environment.")
	e.sample("go_info", `version="`+runtime.Version()+`"`, 1)
	e.gauge("go_goroutines", "Number of goroutines that currently exist.", float64(runtime.NumGoroutine()))
	e.gauge("go_memstats_alloc_bytes", "Number of bytes allocated in heap and currently in use.", float64(ms.HeapAlloc))
	e.gauge("go_memstats_heap_inuse_bytes", "Number of heap bytes that are in use.", float64(ms.HeapInuse))
	e.gauge("go_memstats_sys_bytes", "Number of bytes obtained from system.", float64(ms.Sys))
	e.counter("go_gc_cycles_total", "Completed GC cycles.", uint64(ms.NumGC))

	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		e.family("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.")
		e.sample("process_cpu_seconds_total", "", cpu.Seconds())
	}
	if virt, res, ok := memoryOfProcess(); ok {
		e.gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", virt)
		e.gauge("process_resident_memory_bytes", "Resident memory size in bytes.", res)
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		e.gauge("process_open_fds", "Number of open file descriptors.", float64(len(fds)))
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		e.gauge("process_max_fds", "Maximum number of open file descriptors.", float64(lim.Cur))
	}
	e.gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", float64(m.start.UnixNano())/1e9)
}

// memoryOfProcess reads the virtual and resident sizes from /proc/self/statm.
func memoryOfProcess() (virt, res float64, ok bool) {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0, 0, false
	}
	pages, err1 := strconv.ParseFloat(f[0], 64)
	resident, err2 := strconv.ParseFloat(f[1], 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	page := float64(os.Getpagesize())
	return pages * page, resident * page, true
}

// exposition writes the text format: a HELP and TYPE line per family, then
// its samples. Labels are written by the caller, already quoted; no label
// value here needs escaping.
type exposition struct{ w *bufio.Writer }

func (e exposition) family(name, typ, help string) {
	e.w.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " " + typ + "\n")
}

func (e exposition) sample(name, labels string, v float64) {
	e.w.WriteString(name)
	if labels != "" {
		e.w.WriteString("{" + labels + "}")
	}
	e.w.WriteString(" " + formatFloat(v) + "\n")
}

func (e exposition) counter(name, help string, v uint64) {
	e.family(name, "counter", help)
	e.w.WriteString(name + " " + strconv.FormatUint(v, 10) + "\n")
}

func (e exposition) gauge(name, help string, v float64) {
	e.family(name, "gauge", help)
	e.sample(name, "", v)
}

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
