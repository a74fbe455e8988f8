package engine

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stepseq/stepseq/executor/store"
)

// BenchmarkSidecarStateRSS: the peak resident size of a sidecar process
// (`stepseq watch --exit-when-done`, its ru_maxrss) on states of 5, 50 and 100
// MB, every step DONE but the last, whose agent is `true`: the sidecar reads
// and parses the state, writes it twice (the launch, the verdict) and exits.
// A state over the size cap is refused unread (refused = 1).
func BenchmarkSidecarStateRSS(b *testing.B) {
	for _, mb := range []int{5, 50, 100} {
		b.Run(fmt.Sprintf("%dMB", mb), func(b *testing.B) { benchStateRSS(b, mb) })
	}
}

// stateOfSize is a chain state of about mb MB whose steps are all DONE but
// the last.
func stateOfSize(mb int) []byte {
	perStep := len(tailState(1000, 1).Marshal()) / 1000
	return tailState(mb<<20/perStep, 1).Marshal()
}

func benchStateRSS(b *testing.B, mb int) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal("no true on PATH")
	}
	bin := stepseqBinary(b)
	data := stateOfSize(mb)
	var peak int64
	refused := 0.0
	for b.Loop() {
		dir := b.TempDir()
		statePath := filepath.Join(dir, "state.json")
		if err := os.WriteFile(statePath, data, 0o644); err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(bin, "watch", "--exit-when-done", "--log-level", "error", dir)
		cmd.Env = append(os.Environ(), "STEP_AGENT_CMD="+truePath)
		out, err := cmd.CombinedOutput()
		switch {
		case len(data) > int(store.StateCap.Bytes):
			if err == nil || !strings.Contains(string(out), "cap") {
				b.Fatalf("a state over the cap was not refused: %v\n%s", err, out)
			}
			refused = 1
		case err != nil:
			b.Fatalf("watch: %v\n%s", err, out)
		}
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			peak = max(peak, ru.Maxrss) // KiB on Linux
		}
	}
	b.ReportMetric(float64(len(data))/1e6, "state-MB")
	b.ReportMetric(float64(peak)/1024, "peak-rss-MB")
	b.ReportMetric(float64(peak)*1024/float64(len(data)), "rss/state")
	b.ReportMetric(refused, "refused")
}
