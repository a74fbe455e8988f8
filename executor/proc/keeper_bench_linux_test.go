package proc

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// BenchmarkStart measures one agent's whole life, `true` started and its end
// delivered, launched through the keeper and directly by turns, so that the
// two are measured under the same load; cpu-µs/op is this process's CPU.
func BenchmarkStart(b *testing.B) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	for _, kept := range []bool{true, false, true, false} {
		name := "direct"
		if kept {
			name = "keeper"
		}
		b.Run(name, func(b *testing.B) {
			was := keeperAllowed.Load()
			keeperAllowed.Store(kept)
			defer keeperAllowed.Store(was)
			cpu := selfCPU()
			for b.Loop() {
				p, err := Start(Spec{Argv: []string{truePath}})
				if err != nil {
					b.Fatal(err)
				}
				<-p.Done()
			}
			b.ReportMetric(float64((selfCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// selfCPU is this process's user and system CPU so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
