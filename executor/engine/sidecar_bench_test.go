package engine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// gatedPlan is a warm-up step (the agent binary's first start pays for loading it)
// then n steps, step i gated on gates/g<i>, whose agent stamps its start.
func gatedPlan(n int) string {
	steps := []string{`"instruction":"stamp:stamps/warm-up"`}
	for i := range n {
		steps = append(steps, fmt.Sprintf(`"instruction":"stamp:stamps/%d","when":"exists(\"gates/g%d\")"`, i, i))
	}
	return plan("", steps...)
}

// BenchmarkGateLatency measures file created → the agent's first instruction,
// through fsnotify, the watcher, a reconcile pass, a durable state write and a
// spawn, on plans of 100 and 2,000 gated steps, on disk and on tmpfs. Beside it,
// in the same run, the agent's own start (exec → its first instruction, run
// directly); beyond-median-ms and beyond-p99-ms are stepseq's part: the latency
// less the agent's median start.
//
// On disk that part is mostly the durable write the launch waits for, and an
// fsync's cost changes from hour to hour on one machine (the same commit's
// beyond-median-ms was seen from 2.4 to 6.3 ms): floor-write-ms is the median of
// 100 bare durable replacements of a file of the state's size in the same
// folder (create, write, fsync, close, rename), half made before the samples and
// half after, and beyond-floor-ms is what stepseq adds to the agent's start and
// that write. It is the figure to compare across runs.
func BenchmarkGateLatency(b *testing.B) {
	for _, fs := range []struct{ name, base string }{{"disk", ""}, {"tmpfs", "/dev/shm"}} {
		if fs.base != "" {
			if fi, err := os.Stat(fs.base); err != nil || !fi.IsDir() {
				b.Logf("no %s: the tmpfs figures are not measured", fs.base)
				continue
			}
		}
		for _, steps := range []int{100, 2000} {
			b.Run(fmt.Sprintf("%s/%d", fs.name, steps), func(b *testing.B) { benchGate(b, fs.base, steps) })
		}
	}
}

func benchGate(b *testing.B, base string, steps int) {
	const samples = 100
	for b.Loop() {
		dir := b.TempDir()
		if base != "" {
			d, err := os.MkdirTemp(base, "stepseq-gate")
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { os.RemoveAll(d) })
			dir = d
		}
		agent := agentStart(b, dir, 50)
		written := make(chan struct{}, 1)
		_, sc, stop := benchSidecarWith(b, dir, gatedPlan(steps), "gates", SidecarOptions{OnChange: func() {
			select {
			case written <- struct{}{}:
			default:
			}
		}})
		floor := durableWrites(b, dir, samples/2)
		var lat []time.Duration
		for i := range samples {
			// The step must be the current one, waiting on its gate, and written
			// so: asked of the sidecar after each write, since parsing a
			// 2,000-step state file in a loop would take the CPU it measures.
			waitWritten(b, written, func() bool {
				ok := false
				_ = sc.View(context.Background(), func(st *planspec.State) {
					run := st.StepRuns[fmt.Sprintf("s%d", i+2)]
					ok = st.CurrentStep == i+1 && (run == nil || run.Tries == 0)
				})
				return ok
			})
			created := time.Now()
			if err := os.WriteFile(filepath.Join(dir, "gates", fmt.Sprintf("g%d", i)), nil, 0o644); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, stampAfter(b, filepath.Join(dir, "stamps", strconv.Itoa(i))).Sub(created))
		}
		stop()
		floor = append(floor, durableWrites(b, dir, samples/2)...)
		slices.Sort(floor)
		slices.Sort(lat)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		median, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
		write := floor[len(floor)/2]
		b.ReportMetric(ms(median), "median-ms")
		b.ReportMetric(ms(p99), "p99-ms")
		b.ReportMetric(ms(agent), "agent-start-ms")
		b.ReportMetric(ms(median-agent), "beyond-median-ms")
		b.ReportMetric(ms(p99-agent), "beyond-p99-ms")
		b.ReportMetric(ms(write), "floor-write-ms")
		b.ReportMetric(ms(median-agent-write), "beyond-floor-ms")
	}
}

// durableWrites times n bare durable replacements, in dir, of a file the size of
// its state.json: what a state write costs the file system, without stepseq.
func durableWrites(b *testing.B, dir string, n int) []time.Duration {
	b.Helper()
	fi, err := os.Stat(filepath.Join(dir, "state.json"))
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, fi.Size())
	target := filepath.Join(dir, "floor.json")
	defer os.Remove(target)
	var took []time.Duration
	for range n {
		begun := time.Now()
		f, err := os.CreateTemp(dir, ".floor-*")
		if err != nil {
			b.Fatal(err)
		}
		_, err = f.Write(data)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(f.Name(), target)
		}
		if err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(begun))
	}
	return took
}

// waitWritten waits, up to 30 s, for cond to hold, checking after each write.
func waitWritten(b *testing.B, written <-chan struct{}, cond func() bool) {
	b.Helper()
	deadline := time.After(30 * time.Second)
	for !cond() {
		select {
		case <-written:
		case <-time.After(100 * time.Millisecond): // a write told before cond was asked
		case <-deadline:
			b.Fatal("condition not met within 30s")
		}
	}
}

// agentStart is the median time from exec of the fake agent, run directly, to its
// first instruction (a stamp).
func agentStart(b *testing.B, dir string, n int) time.Duration {
	b.Helper()
	var starts []time.Duration
	for i := range n {
		stamp := filepath.Join(dir, fmt.Sprintf("agent-start-%d", i))
		begun := time.Now()
		if err := exec.Command(fakeAgentPath, "stamp:"+stamp).Run(); err != nil {
			b.Fatal(err)
		}
		starts = append(starts, stampAfter(b, stamp).Sub(begun))
		os.Remove(stamp)
	}
	slices.Sort(starts)
	return starts[len(starts)/2]
}

// stampAfter waits for the fake agent's stamp file and returns its time.
func stampAfter(b *testing.B, path string) time.Time {
	b.Helper()
	var ns int64
	waitBench(b, func() bool {
		data, err := os.ReadFile(path)
		ns, _ = strconv.ParseInt(string(data), 10, 64)
		return err == nil && ns > 0
	})
	return time.Unix(0, ns)
}

// benchSidecar runs a sidecar in the test process on dir, with the state given and
// the folder mkdir made, until stop is called. It returns the state file's path.
func benchSidecar(b *testing.B, dir, stateJSON, mkdir string) (string, *Sidecar, func()) {
	return benchSidecarWith(b, dir, stateJSON, mkdir, SidecarOptions{})
}

// benchSidecarWith is benchSidecar with options.
func benchSidecarWith(b *testing.B, dir, stateJSON, mkdir string, opt SidecarOptions) (string, *Sidecar, func()) {
	b.Helper()
	state := filepath.Join(dir, "state.json")
	if err := os.WriteFile(state, []byte(stateJSON), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, mkdir), 0o755); err != nil {
		b.Fatal(err)
	}
	rt, err := NewRuntime(state, nil)
	if err != nil {
		b.Fatal(err)
	}
	rt.Getenv = func(k string) string {
		if k == "STEP_AGENT_CMD" {
			return fakeAgentPath
		}
		return ""
	}
	sc, err := NewSidecar(rt, opt)
	if err != nil {
		b.Fatal(err)
	}
	stop := runBench(sc)
	return state, sc, func() {
		stop()
		rt.Close()
	}
}

// runBench runs the sidecar's loop until stop is called.
func runBench(sc *Sidecar) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = sc.Run(ctx)
	}()
	for !sc.Ready() {
		time.Sleep(time.Millisecond)
	}
	return func() {
		cancel()
		wg.Wait()
	}
}

func waitBench(b *testing.B, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatal("condition not met within 30s")
		}
		time.Sleep(200 * time.Microsecond)
	}
}

var bigOnce struct {
	sync.Once
	dir string
	err error
}

// removeBenchWorkspace deletes the big workspace once the benchmarks are done.
func removeBenchWorkspace() {
	if bigOnce.dir != "" {
		os.RemoveAll(bigOnce.dir)
	}
}

// bigWorkspace is 50,000 files in 5,000 directories, made once per run.
func bigWorkspace(b *testing.B) string {
	b.Helper()
	bigOnce.Do(func() {
		bigOnce.dir, bigOnce.err = os.MkdirTemp("", "stepseq-bench-big-")
		for d := 0; d < 5000 && bigOnce.err == nil; d++ {
			sub := filepath.Join(bigOnce.dir, fmt.Sprintf("d%02d", d/100), fmt.Sprintf("s%02d", d%100))
			if bigOnce.err = os.MkdirAll(sub, 0o755); bigOnce.err != nil {
				break
			}
			for f := range 10 {
				if bigOnce.err = os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%d.txt", f)), []byte("x\n"), 0o644); bigOnce.err != nil {
					break
				}
			}
		}
	})
	if bigOnce.err != nil {
		b.Fatal(bigOnce.err)
	}
	return bigOnce.dir
}

// bigPlan names three paths: an output, a gate, and a file read by a check.
const bigPlan = `"instruction":"write:out/report.md","requiredOutputs":["out/report.md"],"when":"exists(\"approved.txt\")","check":"size(\"d00/s00/f0.txt\") > 0"`

// BenchmarkSidecarStartReady starts a separate sidecar process on the 50,000-file
// workspace and measures start → ready (its journal's ready record), the inotify
// watches it holds, and its peak RSS.
func BenchmarkSidecarStartReady(b *testing.B) {
	dir := bigWorkspace(b)
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	var watches, rssKB int64
	for b.Loop() {
		_ = os.RemoveAll(filepath.Join(dir, ".stepseq"))
		if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(plan("", bigPlan)), 0o644); err != nil {
			b.Fatal(err)
		}
		journal := filepath.Join(dir, ".stepseq", "journal.jsonl")
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), "STEPSEQ_TEST_SIDECAR="+filepath.Join(dir, "state.json"), "STEP_AGENT_CMD="+fakeAgentPath)
		start := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		var ready string
		waitBench(b, func() bool {
			data, _ := os.ReadFile(journal)
			for _, line := range strings.Split(string(data), "\n") {
				if strings.Contains(line, `"event":"ready"`) {
					ready = line
					return true
				}
			}
			return false
		})
		total += time.Since(start)
		if i := strings.Index(ready, `"watches":`); i >= 0 {
			watches, _ = strconv.ParseInt(strings.TrimRight(ready[i+len(`"watches":`):], "}"), 10, 64)
		}
		rssKB = statusKB(cmd.Process.Pid, "VmHWM:")
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "start-to-ready-ms")
	b.ReportMetric(float64(watches), "watches")
	b.ReportMetric(float64(rssKB)/1024, "peak-RSS-MB")
}

// BenchmarkSidecarIdleCPU measures the CPU a sidecar uses over 10 s of idling on
// the 50,000-file workspace, its gate closed. Idle, it should make no wakeups.
func BenchmarkSidecarIdleCPU(b *testing.B) {
	dir := bigWorkspace(b)
	_ = os.RemoveAll(filepath.Join(dir, ".stepseq"))
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(plan("", bigPlan)), 0o644); err != nil {
		b.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), "STEPSEQ_TEST_SIDECAR="+filepath.Join(dir, "state.json"), "STEP_AGENT_CMD="+fakeAgentPath)
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		waitBench(b, func() bool {
			data, _ := os.ReadFile(filepath.Join(dir, ".stepseq", "journal.jsonl"))
			return strings.Contains(string(data), `"event":"ready"`)
		})
		before := cpuNanos(cmd.Process.Pid)
		if before == 0 {
			b.Fatal("no CPU time readable from /proc/PID/task/*/schedstat")
		}
		time.Sleep(10 * time.Second) // the measurement window, not a synchronisation
		after := cpuNanos(cmd.Process.Pid)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		b.ReportMetric(float64(after-before)/1e6, "idle-cpu-ms-per-10s")
	}
}

// BenchmarkSidecarBurst creates 10,000 files under a watched glob at once: a
// handful of reconcile passes, and the gate that needs all of them opens.
func BenchmarkSidecarBurst(b *testing.B) {
	for b.Loop() {
		dir := fastDir(b)
		state, sc, stop := benchSidecar(b, dir, plan("", `"instruction":"write:done","when":"len(glob(\"burst/**/*.txt\")) >= 10000"`), "burst")
		before := sc.Passes()
		for d := range 10 {
			sub := filepath.Join(dir, "burst", fmt.Sprintf("d%d", d))
			if err := os.MkdirAll(sub, 0o755); err != nil {
				b.Fatal(err)
			}
			for f := range 1000 {
				if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%04d.txt", f)), nil, 0o644); err != nil {
					b.Fatal(err)
				}
			}
		}
		waitBench(b, func() bool {
			st, err := (&store.StateFile{Path: state}).Read()
			return err == nil && st.Status == planspec.StatusDone
		})
		passes := sc.Passes() - before
		stop()
		// One pass launches the step and one judges its exit: the rest is the burst.
		b.ReportMetric(float64(passes), "passes")
	}
}

// fastDir is a temporary directory in memory when /dev/shm exists: on a slow
// disk, creating 10,000 files takes seconds and the burst would measure the disk
// rather than the sidecar (a checkout on a usual disk takes a fraction of that).
func fastDir(b *testing.B) string {
	b.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		dir, err := os.MkdirTemp("/dev/shm", "stepseq-burst-")
		if err == nil {
			b.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return b.TempDir()
}

// statusKB reads a kB field of /proc/PID/status.
func statusKB(pid int, key string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, key) {
			f := strings.Fields(line)
			if len(f) >= 2 {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				return n
			}
		}
	}
	return 0
}

// cpuNanos is the CPU time of all a process's threads, in ns, from their
// /proc/PID/task/TID/schedstat (finer than the clock ticks of /proc/PID/stat).
func cpuNanos(pid int) int64 {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0
	}
	var total int64
	for _, t := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue
		}
		if f := strings.Fields(string(data)); len(f) > 0 {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			total += n
		}
	}
	return total
}

// BenchmarkReportToPhase measures a worker's report file written → the report and
// its phase in state.json, under the sidecar: fsnotify, the settle window, the
// report read and judged, a durable state write.
func BenchmarkReportToPhase(b *testing.B) {
	const samples = 200
	for b.Loop() {
		dir := b.TempDir()
		state, _, stop := benchSidecar(b, dir, plan(`"stepseq":{"reports":"required"}`, `"instruction":"waitfor:release"`), "x")
		reports := filepath.Join(dir, ".stepseq", "reports", "s1")
		waitBench(b, func() bool {
			st, err := (&store.StateFile{Path: state}).Read()
			return err == nil && st.Run("s1").Phase == planspec.PhaseDispatching
		})
		var lat []time.Duration
		for i := range samples {
			status := planspec.ReportMilestone
			if i == 0 {
				status = planspec.ReportAccepted
			}
			summary := fmt.Sprintf("sample %d", i)
			block := fmt.Sprintf("status: %s\nsummary: %s\nevidence: e\nrisk: none\nnext: more\n", status, summary)
			tmp := filepath.Join(reports, fmt.Sprintf(".%d.tmp", i))
			if err := os.WriteFile(tmp, []byte(block), 0o644); err != nil {
				b.Fatal(err)
			}
			written := time.Now()
			if err := os.Rename(tmp, filepath.Join(reports, fmt.Sprintf("1-%d.yaml", i))); err != nil {
				b.Fatal(err)
			}
			waitBench(b, func() bool {
				st, err := (&store.StateFile{Path: state}).Read()
				if err != nil {
					return false
				}
				rs := st.Run("s1").Reports
				return len(rs) > 0 && rs[len(rs)-1].Summary == summary && st.Run("s1").Phase == planspec.PhaseInProgress
			})
			lat = append(lat, time.Since(written))
		}
		if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
			b.Fatal(err)
		}
		stop()
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "median-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
}
