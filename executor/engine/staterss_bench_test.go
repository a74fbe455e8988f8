package engine

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// BenchmarkSidecarStateRSS: the peak resident size of a sidecar process
// (`stepseq watch --exit-when-done`, its ru_maxrss) on states of 5, 50, 60
// (about the largest the size cap lets through) and 100 MB, every step DONE
// but the last, whose agent is `true`: the sidecar reads and parses the state,
// writes it twice (the launch, the verdict) and exits. A state over the size
// cap is refused unread (refused = 1), and the sidecar stopped once it said so.
// The sidecar is started by testdata/peakrss, whose figure is the sidecar's
// own: one this process forked would count this process's peak too.
func BenchmarkSidecarStateRSS(b *testing.B) {
	for _, mb := range []int{5, 50, 60, 100} {
		b.Run(fmt.Sprintf("%dMB", mb), func(b *testing.B) { benchStateRSS(b, mb) })
	}
}

// stateOfSize is a chain state of about mb MB whose steps are all DONE but
// the last, each with an instruction of 4 KB.
func stateOfSize(mb int) []byte {
	long := func(n int) *planspec.State {
		st := tailState(n, 1)
		for _, spec := range st.Steps {
			spec.Instruction += strings.Repeat(" Read the notes and cite them.", 4096/30)
		}
		return st
	}
	perStep := len(long(100).Marshal()) / 100
	return long(mb << 20 / perStep).Marshal()
}

func benchStateRSS(b *testing.B, mb int) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal("no true on PATH")
	}
	bin, peakrss := stepseqBinary(b), peakRSSBinary(b)
	data := stateOfSize(mb)
	var peak int64
	refused := 0.0
	for b.Loop() {
		dir := b.TempDir()
		statePath := filepath.Join(dir, "state.json")
		if err := os.WriteFile(statePath, data, 0o644); err != nil {
			b.Fatal(err)
		}
		peakFile := filepath.Join(dir, "peak-rss")
		cmd := exec.Command(peakrss, bin, "watch", "--exit-when-done", "--log-level", "error", dir)
		cmd.Env = append(os.Environ(), "STEP_AGENT_CMD="+truePath, "PEAKRSS_OUT="+peakFile)
		var out syncBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		if len(data) > int(store.StateCap.Bytes) {
			// Refused, the sidecar waits for a state it can read: stopped once
			// it said so.
			waitBench(b, func() bool { return strings.Contains(out.String(), "cap") })
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
			refused = 1
		} else if err := cmd.Wait(); err != nil {
			b.Fatalf("watch: %v\n%s", err, out.String())
		}
		kib, err := os.ReadFile(peakFile)
		if err != nil {
			b.Fatalf("peak RSS: %v\n%s", err, out.String())
		}
		n, err := strconv.ParseInt(string(kib), 10, 64)
		if err != nil {
			b.Fatalf("peak RSS %q: %v", kib, err)
		}
		peak = max(peak, n)
	}
	b.ReportMetric(float64(len(data))/1e6, "state-MB")
	b.ReportMetric(float64(peak)/1024, "peak-rss-MB")
	b.ReportMetric(float64(peak)*1024/float64(len(data)), "rss/state")
	b.ReportMetric(refused, "refused")
}

var peakRSSBin struct {
	sync.Once
	path string
	err  error
}

// peakRSSBinary builds testdata/peakrss once per run of the tests.
func peakRSSBinary(b testing.TB) string {
	b.Helper()
	peakRSSBin.Do(func() {
		peakRSSBin.path = filepath.Join(filepath.Dir(fakeAgentPath), "peakrss")
		out, err := exec.Command("go", "build", "-o", peakRSSBin.path, "../testdata/peakrss").CombinedOutput()
		if err != nil {
			peakRSSBin.err = fmt.Errorf("build peakrss: %v\n%s", err, out)
		}
	})
	if peakRSSBin.err != nil {
		b.Fatal(peakRSSBin.err)
	}
	return peakRSSBin.path
}
