package engine

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/store"
)

// The figures of runs, measured on the stepseq binary itself
// (built once, as the Makefile builds it), not on the test binary: RSS is
// mostly the binary's pages, and the test binary carries the tests.

var stepseqBin struct {
	sync.Once
	path string
	err  error
}

// stepseqBinary builds the stepseq command once per run of the benchmarks.
func stepseqBinary(b testing.TB) string {
	b.Helper()
	stepseqBin.Do(func() {
		dir := filepath.Dir(fakeAgentPath)
		stepseqBin.path = filepath.Join(dir, "stepseq")
		build := exec.Command("go", "build", "-o", stepseqBin.path, "github.com/stepseq/stepseq")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := build.CombinedOutput()
		if err != nil {
			stepseqBin.err = fmt.Errorf("build stepseq: %v\n%s", err, out)
		}
	})
	if stepseqBin.err != nil {
		b.Fatal(stepseqBin.err)
	}
	return stepseqBin.path
}

// startWatch runs `stepseq watch dir` and waits for its journal's ready
// record; it returns the process and how long start → ready took.
func startWatch(b *testing.B, dir string, args ...string) (*exec.Cmd, time.Duration) {
	b.Helper()
	cmd := exec.Command(stepseqBinary(b), append([]string{"watch", dir, "--log-level", "error"}, args...)...)
	cmd.Env = append(os.Environ(), "STEP_AGENT_CMD="+fakeAgentPath)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
	})
	journal := filepath.Join(dir, ".stepseq", "journal.jsonl")
	waitBench(b, func() bool {
		data, _ := os.ReadFile(journal)
		return strings.Contains(string(data), `"event":"ready"`)
	})
	return cmd, time.Since(start)
}

// gatedRuns writes n run files, run i with one step gated on gates/g<i> whose
// agent stamps its start in stamps/<i>, with their folders and journals, as
// stepseq start leaves them.
func gatedRuns(b *testing.B, dir string, n int) {
	b.Helper()
	for _, sub := range []string{"gates", "stamps"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for i := range n {
		st := plan(fmt.Sprintf(`"stepseq":{"name":"r%d"}`, i), fmt.Sprintf(`"instruction":"stamp:stamps/%d","when":"exists(\"gates/g%d\")"`, i, i))
		name := fmt.Sprintf("r%04d", i)
		rw := store.Workspace{Dir: dir}.ForRun(name)
		if err := os.MkdirAll(rw.RunDir(), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(rw.JournalPath(), []byte(`{"event":"run-start"}`+"\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(store.RunStatePath(dir, name), []byte(st), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRuns_300Idle: 300 runs in one sidecar, each gated on its own file.
// After ready: the sidecar's RSS, the CPU it uses idling over 10 s, and gate
// opened → the run's agent started (its first instruction, agent start-up
// included), for 20 gates one after another; agent-start-ms is the fake agent's
// own start, run directly.
func BenchmarkRuns_300Idle(b *testing.B) {
	const runs, gates = 300, 20
	for b.Loop() {
		dir := b.TempDir()
		gatedRuns(b, dir, runs)
		cmd, ready := startWatch(b, dir)
		pid := cmd.Process.Pid
		rss := statusKB(pid, "VmRSS:")
		before := cpuNanos(pid)
		time.Sleep(10 * time.Second) // the measurement window, not a synchronisation
		idle := cpuNanos(pid) - before
		var lat []time.Duration
		for i := range gates {
			n := i * (runs / gates)
			opened := time.Now()
			if err := os.WriteFile(filepath.Join(dir, "gates", fmt.Sprintf("g%d", n)), nil, 0o644); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, stampAfter(b, filepath.Join(dir, "stamps", fmt.Sprint(n))).Sub(opened))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(ready.Microseconds())/1000, "start-to-ready-ms")
		b.ReportMetric(float64(rss)/1024, "RSS-MB")
		b.ReportMetric(float64(statusKB(pid, "VmHWM:"))/1024, "peak-RSS-MB")
		b.ReportMetric(float64(idle)/1e6, "idle-cpu-ms-per-10s")
		b.ReportMetric(msOf(lat[len(lat)/2]), "gate-to-agent-median-ms")
		b.ReportMetric(msOf(lat[len(lat)-1]), "gate-to-agent-max-ms")
		b.ReportMetric(msOf(agentStart(b, dir, 10)), "agent-start-ms")
	}
}

// BenchmarkRuns_1000: 1,000 runs: `stepseq watch` start → ready (every run
// taken up: the first pass reads them all before the ready record), and
// `stepseq runs` on them, as a process.
func BenchmarkRuns_1000(b *testing.B) {
	const runs = 1000
	for b.Loop() {
		dir := b.TempDir()
		gatedRuns(b, dir, runs)
		cmd, ready := startWatch(b, dir)
		b.ReportMetric(float64(ready.Microseconds())/1000, "start-to-ready-ms")
		b.ReportMetric(float64(statusKB(cmd.Process.Pid, "VmRSS:"))/1024, "RSS-MB")
		var took []time.Duration
		for range 5 {
			start := time.Now()
			out, err := exec.Command(stepseqBinary(b), "runs", dir).Output()
			took = append(took, time.Since(start))
			if err != nil || strings.Count(string(out), "\n") != runs+1 {
				b.Fatalf("stepseq runs: %v, %d lines", err, strings.Count(string(out), "\n"))
			}
		}
		slices.Sort(took)
		b.ReportMetric(msOf(took[len(took)/2]), "stepseq-runs-ms")
		start := time.Now()
		if list, err := store.ListRuns(store.Workspace{Dir: dir}); err != nil || len(list) != runs {
			b.Fatalf("ListRuns: %d, %v", len(list), err)
		}
		b.ReportMetric(msOf(time.Since(start)), "ListRuns-ms")
	}
}

// BenchmarkSidecar_IdleRSS: an idle `stepseq watch` with one plain plan, its
// step gated on a file that does not come.
func BenchmarkSidecar_IdleRSS(b *testing.B) {
	for b.Loop() {
		dir := b.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(plan("", `"instruction":"write:out","when":"exists(\"gate\")"`)), 0o644); err != nil {
			b.Fatal(err)
		}
		cmd, _ := startWatch(b, dir)
		b.ReportMetric(float64(statusKB(cmd.Process.Pid, "VmRSS:"))/1024, "RSS-MB")
		b.ReportMetric(float64(statusKB(cmd.Process.Pid, "RssAnon:"))/1024, "RSS-anon-MB")
		b.ReportMetric(float64(statusKB(cmd.Process.Pid, "RssFile:"))/1024, "RSS-file-MB")
	}
}

// msOf is d in milliseconds, for a benchmark's figures.
func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
