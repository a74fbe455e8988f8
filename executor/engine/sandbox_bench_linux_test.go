package engine

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// BenchmarkSandboxChain: the chain of 100 steps with agent `true` under check,
// bare and then every step sandboxed (--sandbox), in the same run:
// sandbox-µs/step is what bubblewrap adds to a step.
func BenchmarkSandboxChain(b *testing.B) {
	const steps = 100
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal("no true on PATH")
	}
	run := func(pol core.SandboxPolicy) time.Duration {
		dir := b.TempDir()
		statePath := filepath.Join(dir, "state.json")
		if err := os.WriteFile(statePath, chainState(steps, false).Marshal(), 0o644); err != nil {
			b.Fatal(err)
		}
		rt, err := NewRuntime(statePath, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer rt.Close()
		rt.Sandbox = pol
		rt.Getenv = func(k string) string {
			if k == "STEP_AGENT_CMD" {
				return truePath
			}
			return ""
		}
		start := time.Now()
		if err := driveCheck(rt); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		got, err := (&store.StateFile{Path: statePath}).Read()
		if err != nil || got.Status != planspec.StatusDone {
			b.Fatalf("chain did not finish: %v %+v", err, got)
		}
		return took
	}
	var bare, boxed time.Duration
	for b.Loop() {
		bare += run(core.SandboxPolicy{})
		boxed += run(core.SandboxPolicy{All: true})
	}
	n := float64(b.N) * steps
	b.ReportMetric(float64(bare.Microseconds())/n, "bare-µs/step")
	b.ReportMetric(float64(boxed.Microseconds())/n, "sandboxed-µs/step")
	b.ReportMetric(float64((boxed-bare).Microseconds())/n, "sandbox-µs/step")
}
