package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkStartup: `stepseq --version`, from exec to exit, against `true`
// in the same run, as medians of many runs. init-ms is the package
// initialisation GODEBUG=inittrace=1 reports: what every command pays before
// main, so packages that only `watch --listen` needs must not add to it.
func BenchmarkStartup(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "stepseq")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	const runs = 200
	var self, floor, initMs float64
	for b.Loop() {
		self = medianRun(b, runs, bin, "--version")
		floor = medianRun(b, runs, truePath)
		initMs = initTime(b, bin)
	}
	b.ReportMetric(self, "version-ms")
	b.ReportMetric(floor, "true-ms")
	b.ReportMetric(initMs, "init-ms")
}

// medianRun runs argv n times and returns the median wall time in ms.
func medianRun(b *testing.B, n int, argv ...string) float64 {
	b.Helper()
	times := make([]float64, 0, n)
	for range n {
		start := time.Now()
		if err := exec.Command(argv[0], argv[1:]...).Run(); err != nil {
			b.Fatalf("%s: %v", argv[0], err)
		}
		times = append(times, float64(time.Since(start).Microseconds())/1e3)
	}
	slices.Sort(times)
	return times[n/2]
}

// initTime is the median over a few runs of the summed clock time of every
// package's init, in ms.
func initTime(b *testing.B, bin string) float64 {
	b.Helper()
	var sums []float64
	for range 21 {
		cmd := exec.Command(bin, "--version")
		cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		sum := 0.0
		for line := range strings.Lines(stderr.String()) {
			// init pkg @0.12 ms, 0.34 ms clock, 56 bytes, 7 allocs
			f := strings.Fields(line)
			if len(f) >= 7 && f[0] == "init" && f[6] == "clock," {
				ms, _ := strconv.ParseFloat(f[4], 64)
				sum += ms
			}
		}
		sums = append(sums, sum)
	}
	slices.Sort(sums)
	return sums[len(sums)/2]
}
