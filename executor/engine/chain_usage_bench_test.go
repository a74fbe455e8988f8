package engine

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stepseq/stepseq/planspec"
)

// BenchmarkChainUsage is the chain of 100 steps under check with each try's
// usage recorded: the agent is claude, a script that prints the real claude's
// result, so that each try's usage is read and kept in the state and the
// journal. Beside it, today's chain (agent true, no usage) in the same run.
// The floor of each spawns its own agent: cpu-µs/step compares stepseq's work.
func BenchmarkChainUsage(b *testing.B) {
	fixture, err := filepath.Abs("../proc/testdata/usage/claude-2.1.332.json")
	if err != nil {
		b.Fatal(err)
	}
	bin := b.TempDir()
	claude := filepath.Join(bin, "claude")
	if err := os.WriteFile(claude, []byte("#!/bin/sh\nexec cat "+fixture+"\n"), 0o755); err != nil {
		b.Fatal(err)
	}
	b.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal("no true on PATH")
	}
	b.Run("today/100", func(b *testing.B) { benchChainOf(b, 100, false, driveCheck, chainAgent{path: truePath}) })
	b.Run("usage/100", func(b *testing.B) {
		benchChainOf(b, 100, false, driveCheck, chainAgent{path: claude, preset: "claude"})
		checkUsageRecorded(b)
	})
}

// checkUsageRecorded fails the benchmark when the chain it ran recorded no
// usage: the figure would be today's.
func checkUsageRecorded(b *testing.B) {
	b.Helper()
	if lastChainSpend.CostUSD == 0 || lastChainSpend.Tokens() == 0 {
		b.Fatalf("no usage recorded: %+v", lastChainSpend)
	}
}

// lastChainSpend is the spend of the last chain a benchmark ran.
var lastChainSpend planspec.Spend
