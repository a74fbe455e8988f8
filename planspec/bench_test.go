package planspec

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
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

// BenchmarkParsePlan10000: a 10,000-step plan just under the size cap validates
// in well under a second.
func BenchmarkParsePlan10000(b *testing.B) { benchmarkParsePlan(b, leanPlan(10_000)) }

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
		env := &Env{Step: "build", Runs: map[string]*StepRun{"build": {Status: StatusDone, Tries: 1}}}
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
