package notify

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"
)

// waitFor polls cond; benchmarks use it between samples, never inside one.
func waitFor(b *testing.B, what string, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// From Emit to the command sink's process running: the command, a shell script as
// a typical notify command is, writes the report's ID to a FIFO as it starts. Each
// sample starts with the sink idle, as a transition after a quiet spell finds it.
func BenchmarkNotify_EmitToCommandStart(b *testing.B) {
	const samples = 250
	dir := b.TempDir()
	fifo := filepath.Join(dir, "started")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		b.Fatal(err)
	}
	// Opened read-write, the FIFO never reports end of file between writers.
	f, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	started := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			started <- sc.Text()
		}
		close(started)
	}()
	ws := b.TempDir()
	argv := []string{"/bin/sh", "-c", `echo "$STEPSEQ_NOTIFY_ID" >"$1"; cat >/dev/null`, "sh", fifo}
	n, err := New(Config{Dir: ws, Sinks: []SinkConfig{{Command: argv}}, Logger: testLogger(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer closeNotifier(b, n)
	sink := sinkID(KindCommand, argv...)
	for range b.N {
		var lat, emit []time.Duration
		for i := range samples {
			waitFor(b, "the sink idle", func() bool { return n.ob.pending(sink) == 0 })
			t0 := time.Now()
			r, err := n.Emit(Notice{Plan: "bench", Step: "s", Try: i, Status: "dispatching"})
			emit = append(emit, time.Since(t0))
			if err != nil {
				b.Fatal(err)
			}
			select {
			case id := <-started:
				if id != r.ID {
					b.Fatalf("started for %s, want %s", id, r.ID)
				}
			case <-time.After(30 * time.Second):
				b.Fatal("the command never started")
			}
			lat = append(lat, time.Since(t0))
		}
		b.ReportMetric(ms(percentile(lat, .5)), "start-median-ms")
		b.ReportMetric(ms(percentile(lat, .99)), "start-p99-ms")
		b.ReportMetric(ms(percentile(emit, .5)), "emit-median-ms")
		b.ReportMetric(samples, "samples")
	}
}

// 10,000 reports while the webhook answers 503, then it comes back: the outbox
// and the heap stay under their caps throughout, and every report arrives.
func BenchmarkNotify_WebhookDown10k(b *testing.B) {
	const reports = 10_000
	for range b.N {
		h := newHook(b)
		h.down.Store(true)
		ws := b.TempDir()
		n, err := New(Config{Dir: ws, Sinks: []SinkConfig{{Webhook: h.srv.URL}}, Logger: testLogger(b),
			Retry: Retry{Initial: time.Millisecond, Max: 20 * time.Millisecond, For: time.Hour}})
		if err != nil {
			b.Fatal(err)
		}
		heap := func() uint64 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return m.HeapInuse
		}
		base := heap()
		var peakOutbox int64
		var peakHeap uint64
		ids := make(map[string]bool, reports)
		t0 := time.Now()
		for i := range reports {
			r, err := n.Emit(Notice{Plan: "bench", Step: "build", Try: i%3 + 1, Who: "agent", Status: "milestone",
				Output: "compiled 42 packages; 3 tests left", Next: "run the remaining tests"})
			if err != nil {
				b.Fatal(err)
			}
			ids[r.ID] = true
			peakOutbox = max(peakOutbox, n.OutboxBytes())
			if i%1000 == 999 {
				peakHeap = max(peakHeap, heap())
			}
		}
		emitTime := time.Since(t0)
		failed := h.requests.Load()
		h.down.Store(false)
		t1 := time.Now()
		waitFor(b, "every report at the webhook", func() bool { return len(firstSeen(h.received())) >= reports })
		drain := time.Since(t1)
		got := h.received()
		for _, id := range got {
			delete(ids, id)
		}
		if len(ids) > 0 {
			b.Fatalf("%d reports never arrived", len(ids))
		}
		if !slices.IsSorted(firstSeen(got)) {
			b.Fatal("reports arrived out of order")
		}
		growth := int64(peakHeap) - int64(base)
		const heapCap = 8 << 20
		if peakOutbox > DefaultMaxOutboxBytes+DefaultSegmentBytes {
			b.Errorf("outbox reached %d bytes, cap %d", peakOutbox, DefaultMaxOutboxBytes+DefaultSegmentBytes)
		}
		if growth > heapCap {
			b.Errorf("heap grew %d bytes, cap %d", growth, heapCap)
		}
		b.ReportMetric(float64(peakOutbox), "outbox-peak-bytes")
		b.ReportMetric(float64(growth), "heap-growth-bytes")
		b.ReportMetric(float64(emitTime.Microseconds())/reports, "emit-us")
		b.ReportMetric(float64(failed), "failed-requests")
		b.ReportMetric(ms(drain), "drain-ms")
		b.ReportMetric(float64(len(got)-reports), "repeats")
		closeNotifier(b, n)
	}
}
