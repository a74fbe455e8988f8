package notify

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/engine"
)

// From a transition in a real sidecar to its command sink's process running: a
// one-step plan whose agent (`true`) succeeds at once is re-run by a trigger;
// the machine's dispatching notification carries the time of the transition,
// and the sink, a shell script, writes it to a FIFO as it starts. Each sample
// starts with the sink idle.
func BenchmarkNotify_SidecarTransitionToCommandStart(b *testing.B) {
	const samples = 50
	b.Setenv("STEP_AGENT_CMD", "true")
	tmp := b.TempDir()
	fifo := filepath.Join(tmp, "started")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		b.Fatal(err)
	}
	f, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	type start struct {
		status string
		note   time.Time
		seen   time.Time
	}
	started := make(chan start, 16)
	go func() {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			seen := time.Now()
			status, at, _ := strings.Cut(sc.Text(), " ")
			t, _ := time.Parse(time.RFC3339Nano, at)
			started <- start{status: status, note: t, seen: seen}
		}
	}()
	ws := b.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "plans"), 0o755); err != nil {
		b.Fatal(err)
	}
	plan := "name: bench\nsteps:\n  - id: s\n    title: S\n    instruction: go\n"
	if err := os.WriteFile(filepath.Join(ws, "plans", "p.yaml"), []byte(plan), 0o644); err != nil {
		b.Fatal(err)
	}
	rt, err := engine.NewRuntime(filepath.Join(ws, "state.json"), testLogger(b))
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	argv := []string{"/bin/sh", "-c", `echo "${STEPSEQ_NOTIFY_EVENT:-$STEPSEQ_NOTIFY_STATUS} $STEPSEQ_NOTIFY_TIME" >"$1"; cat >/dev/null`, "sh", fifo}
	var n *Notifier
	sc, err := engine.NewSidecar(rt, engine.SidecarOptions{Notifier: notifierFunc(func(note core.Notification) { n.Notify(note) })})
	if err != nil {
		b.Fatal(err)
	}
	if n, err = New(Config{Dir: ws, Sinks: []SinkConfig{{Command: argv}}, Logger: testLogger(b)}); err != nil {
		b.Fatal(err)
	}
	defer closeNotifier(b, n)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	sink := sinkID(KindCommand, argv...)
	// next waits for the sink to start for a report of status; the others pass.
	next := func(status string) start {
		timeout := time.After(30 * time.Second)
		for {
			select {
			case s := <-started:
				if s.status == status {
					return s
				}
			case <-timeout:
				b.Fatalf("no %s report reached the command", status)
			}
		}
	}
	next("plan_done")
	for range b.N {
		var lat []time.Duration
		for range samples {
			waitFor(b, "the sink idle", func() bool { return n.ob.pending(sink) == 0 })
			if err := engine.WriteTrigger(rt.WS, core.Trigger{Step: "s", From: "trigger"}); err != nil {
				b.Fatal(err)
			}
			s := next("dispatching")
			lat = append(lat, s.seen.Sub(s.note))
			next("plan_done")
		}
		b.ReportMetric(ms(percentile(lat, .5)), "transition-to-start-median-ms")
		b.ReportMetric(ms(percentile(lat, .99)), "transition-to-start-p99-ms")
		b.ReportMetric(samples, "samples")
	}
}

type notifierFunc func(core.Notification)

func (f notifierFunc) Notify(n core.Notification) { f(n) }
