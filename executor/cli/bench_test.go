package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkStartup: `stepseq --version`, from exec to exit, against `true`
// in the same run, as medians of many runs. init-ms is the package
// initialisation GODEBUG=inittrace=1 reports: what every command pays before
// main, so packages that only `watch --listen` needs must not add to it.
func BenchmarkStartup(b *testing.B) {
	bin := buildBinary(b)
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	const runs = 100
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

// buildBinary builds stepseq into a temporary directory as make build does:
// static, without cgo.
func buildBinary(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "stepseq")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/stepseq/stepseq")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// BenchmarkStatus10000: `stepseq status` on the state of a 10,000-step plan
// (3.5 MB, 13,333 conditions), as a process of its own: wall and CPU time per
// run, and the process's peak resident memory.
func BenchmarkStatus10000(b *testing.B) {
	bin := buildBinary(b)
	dir := b.TempDir()
	plan := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(plan, bigPlan(10_000), 0o644); err != nil {
		b.Fatal(err)
	}
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command(bin, "apply", plan, ws).CombinedOutput(); err != nil {
		b.Fatalf("apply: %v\n%s", err, out)
	}
	var cpu time.Duration
	var peak int64
	for b.Loop() {
		cmd := exec.Command(bin, "status", ws)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("status: %v\n%s", err, out)
		}
		cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			peak = max(peak, ru.Maxrss) // KiB on Linux
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N), "ms/status")
	b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N), "cpu-ms/status")
	b.ReportMetric(float64(peak)/1024, "peak-rss-MB")
}

// bigPlan is a plan of n steps, each with its own check and every third with a
// gate on the step before it.
func bigPlan(n int) []byte {
	var buf bytes.Buffer
	buf.WriteString("name: generated\nagent: [demo-agent, --prompt]\nsteps:\n")
	for i := range n {
		fmt.Fprintf(&buf, "  - id: step-%05d\n    title: Step %d of the generated plan\n", i, i)
		fmt.Fprintf(&buf, "    instruction: Read notes/%d.md and write out/step-%d.md, citing at least %d sources.\n", i, i, i%7+1)
		fmt.Fprintf(&buf, "    requiredOutputs: [out/step-%d.md]\n    check: size(\"out/step-%d.md\") > %d\n", i, i, 100+i)
		if i > 0 && i%3 == 0 {
			fmt.Fprintf(&buf, "    when: steps[\"step-%05d\"].status == \"DONE\" && exists(\"approved/%d.txt\")\n", i-1, i)
		}
	}
	return buf.Bytes()
}
