package metrics

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// Standard returns the process's and the Go runtime's series under the names
// Prometheus's own client gives them (process_*, go_*), so that dashboards made
// for any Go service read them. A series whose source this system lacks (no
// /proc) is left out rather than reported as 0.
func Standard() []Collector {
	cs := []Collector{
		NewCounterFunc(Opts{Name: "process_cpu_seconds_total", Help: "Total user and system CPU time spent in seconds."}, cpuSeconds),
		NewGaugeFunc(Opts{Name: "process_max_fds", Help: "Maximum number of open file descriptors."}, maxFDs),
		NewGaugeFunc(Opts{Name: "go_goroutines", Help: "Number of goroutines that currently exist."}, func() float64 { return float64(runtime.NumGoroutine()) }),
		NewGaugeFunc(Opts{Name: "go_memstats_heap_alloc_bytes", Help: "Number of heap bytes allocated and currently in use."}, memStat(func(m *runtime.MemStats) uint64 { return m.HeapAlloc })),
		NewGaugeFunc(Opts{Name: "go_memstats_sys_bytes", Help: "Number of bytes obtained from system."}, memStat(func(m *runtime.MemStats) uint64 { return m.Sys })),
		NewCounterFunc(Opts{Name: "go_gc_cycles_total", Help: "Count of completed GC cycles."}, memStat(func(m *runtime.MemStats) uint64 { return uint64(m.NumGC) })),
		goInfo(),
	}
	if _, _, ok := memory(); ok {
		cs = append(cs,
			NewGaugeFunc(Opts{Name: "process_resident_memory_bytes", Help: "Resident memory size in bytes."}, func() float64 { _, rss, _ := memory(); return rss }),
			NewGaugeFunc(Opts{Name: "process_virtual_memory_bytes", Help: "Virtual memory size in bytes."}, func() float64 { vsz, _, _ := memory(); return vsz }),
		)
	}
	if _, ok := openFDs(); ok {
		cs = append(cs, NewGaugeFunc(Opts{Name: "process_open_fds", Help: "Number of open file descriptors."}, func() float64 { n, _ := openFDs(); return n }))
	}
	if start, ok := startTime(); ok {
		cs = append(cs, NewGaugeFunc(Opts{Name: "process_start_time_seconds", Help: "Start time of the process since unix epoch in seconds."}, func() float64 { return start }))
	}
	return cs
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func maxFDs() float64 {
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) != nil {
		return 0
	}
	return float64(rl.Cur)
}

// memory reads the virtual and resident sizes from /proc/self/statm.
func memory() (vsz, rss float64, ok bool) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, 0, false
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, 0, false
	}
	pages, err1 := strconv.ParseUint(string(f[0]), 10, 64)
	resident, err2 := strconv.ParseUint(string(f[1]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	page := float64(os.Getpagesize())
	return float64(pages) * page, float64(resident) * page, true
}

func openFDs() (float64, bool) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, false
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return 0, false
	}
	return float64(len(names) - 1), true // less the one reading the folder
}

// startTime is the process's start in seconds since the epoch: its start in
// clock ticks after boot (/proc/self/stat) plus the boot time (/proc/stat).
func startTime() (float64, bool) {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, false
	}
	// The command name may hold spaces and parentheses: count from the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(stat[i+1:])
	const startField = 22 - 3 // field 22, counted from the state (field 3)
	if len(f) <= startField {
		return 0, false
	}
	ticks, err := strconv.ParseUint(string(f[startField]), 10, 64)
	if err != nil {
		return 0, false
	}
	sys, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	for line := range bytes.Lines(sys) {
		if rest, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			boot, err := strconv.ParseUint(string(bytes.TrimSpace(rest)), 10, 64)
			if err != nil {
				return 0, false
			}
			const userHZ = 100 // clock ticks per second in /proc on every Linux architecture
			return float64(boot) + float64(ticks)/userHZ, true
		}
	}
	return 0, false
}

// memStat reads one figure of the runtime's memory statistics at scrape time
// (runtime/metrics would be cheaper to read, but its package builds its tables
// at init, in every command).
func memStat(field func(*runtime.MemStats) uint64) func() float64 {
	return func() float64 {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return float64(field(&m))
	}
}

func goInfo() Collector {
	g := NewGaugeVec(Opts{Name: "go_info", Help: "Information about the Go environment."}, []string{"version"})
	g.WithLabelValues(runtime.Version()).Set(1)
	return g
}
