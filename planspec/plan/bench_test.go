package plan

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stepseq/stepseq/planspec"
)

// generatedPlan writes a plan of n steps in which every step has its own check
// and every third a gate naming the step before it: no two conditions are the
// same, so the compile cache does not flatter the figures.
func generatedPlan(n int) []byte {
	var b bytes.Buffer
	b.WriteString("name: generated\nagent: [demo-agent, --prompt]\nstepDelay: 90s\nmaxRetries: 3\ntimeout: 1h\nvars: {topic: solar, pages: 12}\nsteps:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - id: step-%05d\n", i)
		fmt.Fprintf(&b, "    title: Step %d of the generated plan\n", i)
		fmt.Fprintf(&b, "    instruction: Read notes/%d.md and write out/step-%d.md, citing at least %d sources.\n", i, i, i%7+1)
		fmt.Fprintf(&b, "    requiredOutputs: [out/step-%d.md]\n", i)
		fmt.Fprintf(&b, "    check: size(\"out/step-%d.md\") > %d\n", i, 100+i)
		if i > 0 && i%3 == 0 {
			fmt.Fprintf(&b, "    when: steps[\"step-%05d\"].status == \"DONE\" && exists(\"approved/%d.txt\")\n", i-1, i)
		}
	}
	return b.Bytes()
}

// cpuTime is the CPU time this process has used: on a shared machine it varies
// less than the wall clock, and it counts the parallel compilations.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchmarkParsePlan(b *testing.B, data []byte) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	cpu := cpuTime()
	for b.Loop() {
		clear(compiledCache.m) // every iteration compiles, as the first load of a plan does
		if _, err := ParsePlan(bytes.NewReader(data), "generated.yaml"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N), "ms/plan")
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1e3/float64(b.N), "cpu-ms/plan")
}

// BenchmarkParsePlan1000: a 1,000-step plan (190 KB, 1,333 distinct conditions)
// validates in at most 50 ms.
func BenchmarkParsePlan1000(b *testing.B) { benchmarkParsePlan(b, generatedPlan(1000)) }

// BenchmarkParsePlan10000: a 10,000-step plan (2.6 MB, 13,333 distinct
// conditions) validates in about a second; a lean one (one condition every
// other step, 0.8 MB) in well under.
func BenchmarkParsePlan10000(b *testing.B)     { benchmarkParsePlan(b, generatedPlan(10_000)) }
func BenchmarkParsePlan10000Lean(b *testing.B) { benchmarkParsePlan(b, leanPlan(10_000)) }

// BenchmarkParsePlanHostile: a file at the size cap that is no plan is refused
// fast. The worst case is a key as long as the file: YAML scans it whole before
// it can say the document is invalid. The size is MaxPlanSize, printed in MiB.
func BenchmarkParsePlanHostile(b *testing.B) {
	data := []byte(strings.Repeat("k", MaxPlanSize-10) + ": 1\n")
	over := bytes.Repeat([]byte("# comment\n"), MaxPlanSize/10+1)
	b.ReportAllocs()
	var overMs float64
	for b.Loop() {
		if _, err := ParsePlan(bytes.NewReader(data), "hostile.yaml"); err == nil {
			b.Fatal("a huge key was accepted")
		}
		start := time.Now()
		if _, err := ParsePlan(bytes.NewReader(over), "over.yaml"); err == nil {
			b.Fatal("a plan over the cap was accepted")
		}
		overMs += float64(time.Since(start).Microseconds()) / 1e3
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N), "ms/refusal")
	b.ReportMetric(overMs/float64(b.N), "over-cap-ms")
	b.ReportMetric(float64(MaxPlanSize>>20), "cap-MiB")
}

// BenchmarkConditionEval: exists("a.txt") && size("a.txt") > 10 on a real file.
// The target is 2 µs. "stat" is one os.Root.Stat of the same file, the floor
// under any evaluation that looks at the file system; the difference is the cost
// of the condition machinery, reported as overhead-ns/op.
func BenchmarkConditionEval(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("hello, world\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	c, err := CompileCondition(`exists("a.txt") && size("a.txt") > 10`)
	if err != nil {
		b.Fatal(err)
	}
	env := &Env{Root: root, Now: time.Now()}

	var statNs float64
	b.Run("stat", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := root.Stat("a.txt"); err != nil {
				b.Fatal(err)
			}
		}
		statNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("eval", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ok, err := c.Eval(env)
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
		if statNs > 0 {
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)-statNs, "overhead-ns/op")
		}
	})
	b.Run("no-files", func(b *testing.B) {
		c, err := CompileCondition(`steps.build.status == "DONE" && step.tries < 3`)
		if err != nil {
			b.Fatal(err)
		}
		env := &Env{Step: "build", Runs: map[string]*planspec.StepRun{"build": {Status: planspec.StatusDone, Tries: 1}}}
		b.ReportAllocs()
		for b.Loop() {
			if ok, err := c.Eval(env); err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
	})
}

// BenchmarkCompileCondition: one condition, not cached.
func BenchmarkCompileCondition(b *testing.B) {
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if _, err := compileFresh(fmt.Sprintf(`exists("a%d.txt") && size("a%d.txt") > 10`, i, i)); err != nil {
			b.Fatal(err)
		}
	}
}

func compileFresh(src string) (*Condition, error) {
	c, err := parseCondition(src)
	if err != nil {
		return nil, err
	}
	_, err = c.program()
	return c, err
}

// BenchmarkGlobGate100k: a gate len(glob("inbox/*.txt")) >= 100000 over 100,000
// files opens (compiled to globCount, it has no cap), in memory that does not
// grow with the files: heap-KB/eval is what one evaluation allocates.
func BenchmarkGlobGate100k(b *testing.B) {
	const files = 100_000
	base := ""
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		base = "/dev/shm" // creating 100k files on a VM's disk measures the disk
	}
	dir, err := os.MkdirTemp(base, "planspec-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Mkdir(filepath.Join(dir, "inbox"), 0o755); err != nil {
		b.Fatal(err)
	}
	for i := range files {
		if err := os.WriteFile(filepath.Join(dir, "inbox", fmt.Sprintf("m%06d.txt", i)), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	c, err := CompileCondition(fmt.Sprintf(`len(glob("inbox/*.txt")) >= %d`, files))
	if err != nil {
		b.Fatal(err)
	}
	env := &Env{Root: root}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for b.Loop() {
		ok, err := c.Eval(env)
		if err != nil || !ok {
			b.Fatalf("the gate is shut at %d files: %v, %v", files, ok, err)
		}
	}
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N), "ms/eval")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/1024/float64(b.N), "heap-KB/eval")
}
