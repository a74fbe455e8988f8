//go:build linux

package watcher

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// benchConfig names what a plan typically does: the state file, the plans
// directory and the triggers directory.
func benchConfig(root string) Config {
	return Config{Root: root, Paths: []string{"state.json", "plans", ".stepseq/triggers"}}
}

// bigWorkspace returns a workspace of 50,000 files in 5,000 directories
// (100 top directories of 49 each, ten files in each of the 4,900 leaves and
// the 100 tops), made once and reused.
func bigWorkspace(b *testing.B) string {
	b.Helper()
	big.once.Do(func() {
		big.dir, big.err = os.MkdirTemp(bulkBase(), "watcher-bench-")
		if big.err != nil {
			return
		}
		write := func(rel string) {
			if big.err == nil {
				big.err = os.WriteFile(filepath.Join(big.dir, rel), []byte("x\n"), 0o644)
			}
		}
		for top := range 100 {
			for sub := range 50 {
				dir := fmt.Sprintf("d%03d", top)
				if sub > 0 {
					dir = fmt.Sprintf("d%03d/s%02d", top, sub)
				}
				if err := os.MkdirAll(filepath.Join(big.dir, dir), 0o755); err != nil {
					big.err = err
					return
				}
				for f := range 10 {
					write(fmt.Sprintf("%s/f%d.txt", dir, f))
				}
			}
		}
		if big.err == nil {
			big.err = os.MkdirAll(filepath.Join(big.dir, ".stepseq/triggers"), 0o755)
		}
		if big.err == nil {
			big.err = os.MkdirAll(filepath.Join(big.dir, "plans"), 0o755)
		}
		write("state.json")
	})
	if big.err != nil {
		b.Fatal(big.err)
	}
	return big.dir
}

// BenchmarkStartReady: New on a 50,000-file workspace with three paths
// named must cost what the three paths cost, not what the workspace holds.
func BenchmarkStartReady(b *testing.B) {
	root := bigWorkspace(b)
	runtime.GC()
	debug.FreeOSMemory()
	rssBefore := rss()
	var watches int
	for b.Loop() {
		w, err := New(benchConfig(root))
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		watches = w.Stats().Watches
		w.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
	b.ReportMetric(float64(watches), "watches")

	// Memory of one armed watcher, in a process that is otherwise idle.
	w, err := New(benchConfig(root))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	after := rss()
	b.ReportMetric(float64(after)/(1<<20), "rss-MB")
	b.ReportMetric(float64(after-rssBefore)/(1<<20), "rss-delta-MB")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MB")
}

// BenchmarkBurst: 10,000 files created by another process in a watched
// tree become a handful of batches, and none is missed.
func BenchmarkBurst(b *testing.B) {
	var batches, missed int
	var created, lastSeen time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		root := bulkDir(b)
		if err := os.Mkdir(filepath.Join(root, "repo"), 0o755); err != nil {
			b.Fatal(err)
		}
		w, err := New(Config{Root: root, Trees: []string{"repo"}})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		done := make(chan error, 1)
		go func() {
			_, err := burst(filepath.Join(root, "repo"), 10_000)
			created = time.Since(start)
			done <- err
		}()
		seen := make(map[string]bool)
		batches = 0
		timeout := time.NewTimer(deadline)
	read:
		for len(seen) < 10_100 {
			select {
			case batch := <-w.Batches():
				batches++
				for _, p := range batch.Paths {
					seen[p] = true
				}
				lastSeen = time.Since(start)
				timeout.Reset(deadline)
			case <-timeout.C:
				break read
			}
		}
		timeout.Stop()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		missed = 0
		for _, p := range burstPaths(10_000) {
			if !seen["repo/"+p] {
				missed++
			}
		}
		w.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(batches), "batches")
	b.ReportMetric(float64(missed), "missed")
	b.ReportMetric(float64(created.Milliseconds()), "create-ms")
	b.ReportMetric(float64(lastSeen.Milliseconds()), "last-seen-ms")
}

// BenchmarkIdleCPU: an armed watcher with nothing happening uses no CPU:
// no ticker, no timer, no wakeup. The same window without a watcher gives the
// Go runtime's own baseline.
func BenchmarkIdleCPU(b *testing.B) {
	const window = 2 * time.Second
	root := bigWorkspace(b)
	cfg := benchConfig(root)
	cfg.Trees = []string{"d000"} // a tree too: 50 directories, 500 files
	var idle, baseline idleCost
	for b.Loop() {
		baseline = measureIdle(window)
		w, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		idle = measureIdle(window)
		w.Close()
	}
	b.ReportMetric(idle.perTen(window), "cpu-ms-per-10s")
	b.ReportMetric(baseline.perTen(window), "baseline-cpu-ms-per-10s")
	b.ReportMetric(float64(idle.switches), "wakeups-per-2s")
	b.ReportMetric(float64(baseline.switches), "baseline-wakeups-per-2s")
}

type idleCost struct {
	cpu      time.Duration
	switches int64
}

func (c idleCost) perTen(window time.Duration) float64 {
	return float64((c.cpu * (10 * time.Second) / window).Microseconds()) / 1000
}

// measureIdle measures the process's CPU time and voluntary context switches
// over a window in which the caller does nothing.
func measureIdle(window time.Duration) idleCost {
	runtime.GC()
	sw0 := contextSwitches()
	cpu0 := cpuTime()
	time.Sleep(window) // the measurement itself, not a synchronisation
	cpu := cpuTime() - cpu0
	return idleCost{cpu: cpu, switches: contextSwitches() - sw0}
}

// rss is the process's resident set size in bytes.
func rss() int64 {
	return statusField("VmRSS:") * 1024
}

// contextSwitches counts the process's voluntary context switches (wakeups).
func contextSwitches() int64 {
	var n int64
	threads, _ := filepath.Glob("/proc/self/task/*/status")
	for _, t := range threads {
		n += fileField(t, "voluntary_ctxt_switches:")
	}
	return n
}

func statusField(key string) int64 { return fileField("/proc/self/status", key) }

func fileField(name, key string) int64 {
	f, err := os.Open(name)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key); ok {
			n, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return n
		}
	}
	return 0
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sysTime is the process's system CPU time so far: the kernel's share of cpuTime.
func sysTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Stime.Nano())
}
