//go:build linux

package watcher

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BenchmarkBurstCPU: the CPU the watcher spends on a burst of 10,000 and
// 100,000 new files (another process writes them into 100 folders of a
// watched tree), against a plain inotify reader on the same folders in the
// same run: the floor for being told of every file. ratio is the watcher's
// CPU over the floor's; batches is what a consumer gets, each a pass of the
// sidecar; missed counts files no batch named; rescans, the batches that
// told the consumer to read everything again (the kernel's queue overflowed,
// or a batch outgrew its limit). On a shared machine another process's work
// lands on either side, so each side runs several times, taking turns, and
// the median of each is reported.
func BenchmarkBurstCPU(b *testing.B) {
	for _, tc := range []struct{ n, rounds int }{{10_000, 5}, {100_000, 3}} {
		n := tc.n
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var runs []burstRun
			for b.Loop() {
				runs = runs[:0]
				for range tc.rounds {
					runs = append(runs, measureBurst(b, n))
				}
			}
			floor := median(runs, func(r burstRun) time.Duration { return r.floorCPU })
			watcher := median(runs, func(r burstRun) time.Duration { return r.watcherCPU })
			b.ReportMetric(float64(watcher.watcherCPU.Microseconds())/1e3, "watcher-cpu-ms")
			b.ReportMetric(float64(floor.floorCPU.Microseconds())/1e3, "inotify-cpu-ms")
			b.ReportMetric(float64(watcher.watcherCPU)/float64(floor.floorCPU), "ratio")
			b.ReportMetric(float64(watcher.watcherSys.Microseconds())/1e3, "watcher-sys-ms")
			b.ReportMetric(float64(floor.floorSys.Microseconds())/1e3, "inotify-sys-ms")
			b.ReportMetric(float64(watcher.batches), "batches")
			b.ReportMetric(float64(watcher.switches), "watcher-ctxsw")
			b.ReportMetric(float64(floor.floorSwitches), "inotify-ctxsw")
			missed, rescans := 0, 0
			for _, r := range runs {
				missed, rescans = max(missed, r.missed), max(rescans, r.rescans)
			}
			b.ReportMetric(float64(missed), "missed")
			b.ReportMetric(float64(rescans), "rescans")
		})
	}
}

// median returns the run whose key is the median.
func median(runs []burstRun, key func(burstRun) time.Duration) burstRun {
	s := slices.Clone(runs)
	slices.SortFunc(s, func(a, b burstRun) int { return cmp.Compare(key(a), key(b)) })
	return s[len(s)/2]
}

type burstRun struct {
	watcherCPU, floorCPU     time.Duration
	watcherSys, floorSys     time.Duration // the kernel's share
	switches, floorSwitches  int64
	batches, missed, rescans int
}

func measureBurst(b *testing.B, n int) burstRun {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	var r burstRun

	// The floor: a plain inotify reader, on folders made beforehand.
	root := bulkDir(b)
	dirs := makeBurstDirs(b, filepath.Join(root, "repo"))
	runtime.GC()
	cpu0, sys0, sw0 := cpuTime(), sysTime(), contextSwitches()
	done := make(chan error, 1)
	counted := make(chan int, 1)
	ready := make(chan error, 1)
	go func() { counted <- readInotify(dirs, n, ready) }()
	if err := <-ready; err != nil {
		b.Fatal(err)
	}
	go func() {
		_, err := burst(filepath.Join(root, "repo"), n)
		done <- err
	}()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	if got := <-counted; got != n {
		b.Fatalf("the inotify reader saw %d files of %d", got, n)
	}
	r.floorCPU, r.floorSys, r.floorSwitches = cpuTime()-cpu0, sysTime()-sys0, contextSwitches()-sw0
	os.RemoveAll(root)

	// The watcher, with a consumer that reads all along, as a sidecar does.
	root = bulkDir(b)
	makeBurstDirs(b, filepath.Join(root, "repo"))
	w, err := New(Config{Root: root, Trees: []string{"repo"}})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	runtime.GC()
	cpu0, sys0, sw0 = cpuTime(), sysTime(), contextSwitches()
	go func() {
		_, err := burst(filepath.Join(root, "repo"), n)
		done <- err
	}()
	// The consumer only counts while the CPU is measured: what it does with
	// the paths is the sidecar's cost, not the watcher's.
	var got []Batch
	paths := 0
	timeout := time.NewTimer(deadline)
	defer timeout.Stop()
read:
	for paths < n {
		select {
		case batch := <-w.Batches():
			got = append(got, batch)
			paths += len(batch.Paths)
			if batch.Rescan {
				break read // the consumer reads everything again: nothing is missed
			}
			timeout.Reset(deadline)
		case <-timeout.C:
			break read
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	r.watcherCPU, r.watcherSys, r.switches = cpuTime()-cpu0, sysTime()-sys0, contextSwitches()-sw0
	r.batches = len(got)
	seen := make(map[string]bool, n)
	for _, batch := range got {
		if batch.Rescan {
			r.rescans++
			return r
		}
		for _, p := range batch.Paths {
			seen[p] = true
		}
	}
	for _, p := range burstPaths(n) {
		if !seen["repo/"+p] {
			r.missed++
		}
	}
	return r
}

// makeBurstDirs makes the 100 folders of a burst and returns them.
func makeBurstDirs(b *testing.B, dir string) []string {
	b.Helper()
	dirs := make([]string, 100)
	for d := range dirs {
		dirs[d] = filepath.Join(dir, fmt.Sprintf("d%02d", d))
		if err := os.MkdirAll(dirs[d], 0o755); err != nil {
			b.Fatal(err)
		}
	}
	return dirs
}

// readInotify is the plain reader: it watches dirs (with the watcher's mask:
// the same work for the kernel), says so on ready, then
// reads events in blocking reads of 64 KiB until it has seen want files
// created, and returns how many it saw (fewer on an error).
func readInotify(dirs []string, want int, ready chan<- error) int {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		ready <- err
		return 0
	}
	defer unix.Close(fd)
	for _, d := range dirs {
		if _, err := unix.InotifyAddWatch(fd, d, inotifyMask); err != nil {
			ready <- err
			return 0
		}
	}
	ready <- nil
	buf := make([]byte, 64<<10)
	created := 0
	for created < want {
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return created
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			if ev.Mask&unix.IN_CREATE != 0 && ev.Mask&unix.IN_ISDIR == 0 {
				created++
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
	}
	return created
}

// BenchmarkGateLatency: from a file named in the watch set being created to
// the batch that names it reaching the consumer, with the watcher idle
// before (the sidecar's 5ms window), at 100 and 2,000 named paths. The named
// paths are files in two folders, as a plan's outputs and gates are.
func BenchmarkGateLatency(b *testing.B) {
	for _, named := range []int{100, 2000} {
		for _, fs := range []struct{ name, base string }{{"disk", os.TempDir()}, {"tmpfs", "/dev/shm"}} {
			if fi, err := os.Stat(fs.base); err != nil || !fi.IsDir() {
				continue
			}
			b.Run(fmt.Sprintf("%d/%s", named, fs.name), func(b *testing.B) {
				var lat []time.Duration
				for b.Loop() {
					lat = measureGateLatency(b, fs.base, named)
				}
				slices.Sort(lat)
				b.ReportMetric(ms(lat[len(lat)/2]), "median-ms")
				b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
			})
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

// sidecarSettle is the sidecar's coalescing window (executor.DefaultSettle).
const sidecarSettle = 5 * time.Millisecond

func measureGateLatency(b *testing.B, base string, named int) []time.Duration {
	b.Helper()
	root, err := os.MkdirTemp(base, "watcher-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(root)
	for _, d := range []string{"out", "approved"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	paths := make([]string, named)
	for i := range paths {
		if i%2 == 0 {
			paths[i] = fmt.Sprintf("out/step-%d.md", i)
		} else {
			paths[i] = fmt.Sprintf("approved/%d.txt", i)
		}
	}
	w, err := New(Config{Root: root, Paths: append([]string{"state.json", "plans"}, paths...), Settle: sidecarSettle})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	const samples = 200
	lat := make([]time.Duration, 0, samples)
	for i := range samples {
		rel := paths[(i*7919)%named]
		name := filepath.Join(root, filepath.FromSlash(rel))
		// Idle before each sample, as a sidecar waiting on a gate is: a
		// pause of the measurement itself, not a synchronisation.
		time.Sleep(3 * sidecarSettle)
		start := time.Now()
		if err := os.WriteFile(name, nil, 0o644); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, waitPath(b, w, rel, start))
		if err := os.Remove(name); err != nil {
			b.Fatal(err)
		}
		waitPath(b, w, rel, start)
	}
	return lat
}

// waitPath reads batches until one names rel, and returns the time since start.
func waitPath(b *testing.B, w *Watcher, rel string, start time.Time) time.Duration {
	b.Helper()
	timeout := time.NewTimer(deadline)
	defer timeout.Stop()
	for {
		select {
		case batch := <-w.Batches():
			if slices.Contains(batch.Paths, rel) || batch.Rescan {
				return time.Since(start)
			}
		case <-timeout.C:
			b.Fatalf("no batch named %s", rel)
		}
	}
}
