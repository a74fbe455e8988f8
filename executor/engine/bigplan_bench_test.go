package engine

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// BenchmarkSidecarBigPlan: the sidecar (watch --exit-when-done) runs the last
// 200 steps of plans of 1,000 to 50,000 steps, agent `true`, from a state whose
// earlier steps are DONE, so that every write is of the plan's full size. Beside
// it, the floor: per step one spawn of `true` and one durable write of that
// state, the two timed apart (spawn-ms, write-ms). steps/s counts from the
// first agent's launch to the sidecar's exit, cpu-ms/step is the process's CPU
// (user and system) over the same span per step, steadier than the time on a
// loaded machine; start-ms is the time from the sidecar's start (its read of
// the state, its watches) to that launch; rss-MB is the process's peak
// resident size while the sidecar ran (VmHWM, reset before it starts; the
// benchmark's own copy of the state's bytes, and the test binary's, are in it).
func BenchmarkSidecarBigPlan(b *testing.B) {
	for _, steps := range []int{1000, 5000, 20000, 50000} {
		b.Run(fmt.Sprint(steps), func(b *testing.B) { benchBigPlan(b, steps, 200) })
	}
}

// tailState is an n-step chain whose first n-left steps are DONE.
func tailState(n, left int) *planspec.State {
	st := chainState(n, false)
	now := time.Now()
	for _, id := range st.StepQueue[:n-left] {
		core.BeginTry(st, id, now, false)
		core.Record(st, id, core.Exit{}, core.Verdict{OK: true}, now)
		st.CurrentStep++
	}
	st.LastHeartbeatIso = planspec.FormatISO(now)
	return st
}

func benchBigPlan(b *testing.B, steps, left int) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal("no true on PATH")
	}
	data := tailState(steps, left).Marshal()
	var floor, spawn, write, chain, chainCPU, started time.Duration
	var rss int64
	for b.Loop() {
		dir := b.TempDir()
		statePath := filepath.Join(dir, "state.json")
		start := time.Now()
		sf := &store.StateFile{Path: statePath}
		for i := range left {
			t0 := time.Now()
			if err := exec.Command(truePath, chainPrompt(i)).Run(); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if err := sf.WriteBytes(data); err != nil {
				b.Fatal(err)
			}
			spawn, write = spawn+t1.Sub(t0), write+time.Since(t1)
		}
		floor += time.Since(start)

		if err := os.WriteFile(statePath, data, 0o644); err != nil {
			b.Fatal(err)
		}
		first := &firstLaunch{}
		rt, err := NewRuntime(statePath, slog.New(first))
		if err != nil {
			b.Fatal(err)
		}
		rt.Getenv = func(k string) string {
			if k == "STEP_AGENT_CMD" {
				return truePath
			}
			return ""
		}
		debug.FreeOSMemory() // what the benchmark freed leaves the resident size
		resetPeakRSS()
		start = time.Now()
		if err := driveSidecar(rt); err != nil {
			b.Fatal(err)
		}
		end, endCPU := time.Now(), selfCPU()
		if first.at.IsZero() {
			b.Fatal("no agent launched")
		}
		chain += end.Sub(first.at)
		chainCPU += endCPU - first.cpu
		rss = max(rss, peakRSS())
		started += first.at.Sub(start)
		rt.Close()
		got, err := (&store.StateFile{Path: statePath}).Read()
		if err != nil || got.Status != planspec.StatusDone {
			b.Fatalf("plan did not finish: %v", err)
		}
	}
	n := float64(b.N) * float64(left)
	b.ReportMetric(float64(b.N)*float64(left-1)/chain.Seconds(), "steps/s")
	b.ReportMetric(float64(started.Milliseconds())/float64(b.N), "start-ms")
	b.ReportMetric(n/floor.Seconds(), "floor-steps/s")
	b.ReportMetric(float64(spawn.Microseconds())/1e3/n, "spawn-ms")
	b.ReportMetric(float64(write.Microseconds())/1e3/n, "write-ms")
	b.ReportMetric(float64(chainCPU.Microseconds())/1e3/(float64(b.N)*float64(left-1)), "cpu-ms/step")
	b.ReportMetric(float64(len(data))/(1<<20), "state-MiB")
	b.ReportMetric(float64(rss)/(1<<20), "rss-MB")
}

// firstLaunch is a log handler that keeps the time of the first agent launched,
// and the process's CPU then, and drops every record.
type firstLaunch struct {
	at  time.Time
	cpu time.Duration
}

func (h *firstLaunch) Enabled(context.Context, slog.Level) bool { return true }
func (h *firstLaunch) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *firstLaunch) WithGroup(string) slog.Handler            { return h }
func (h *firstLaunch) Handle(_ context.Context, r slog.Record) error {
	if h.at.IsZero() && r.Message == "agent launched" {
		h.at, h.cpu = time.Now(), selfCPU()
	}
	return nil
}

// resetPeakRSS resets the process's peak resident size (Linux: clear_refs 5).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS is the process's peak resident size in bytes since resetPeakRSS
// (VmHWM), 0 where /proc does not say.
func peakRSS() int64 {
	data, _ := os.ReadFile("/proc/self/status")
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
