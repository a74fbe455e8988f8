package engine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/notify"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// chainState is an n-step plan whose steps need nothing but exit 0, and, with
// outputs, two required outputs each (that the benchmark makes beforehand).
func chainState(n int, outputs bool) *planspec.State {
	st := planspec.NewState()
	for i := range n {
		id := fmt.Sprintf("step-%03d", i)
		st.Steps[id] = &planspec.StepSpec{Title: "Step " + id, Instruction: chainPrompt(i)}
		if outputs {
			st.Steps[id].RequiredOutputs = chainOutputs(id)
		}
		st.StepQueue = append(st.StepQueue, id)
	}
	return st
}

func chainOutputs(id string) []string { return []string{"out/" + id + "/a.md", "out/" + id + "/b.md"} }

func chainPrompt(i int) string {
	return fmt.Sprintf("Do step step-%03d and report what you did.", i)
}

// halfDone is the state of the chain halfway: its size is the mean size of the
// state file the chain writes, so the floor writes as many bytes as the chain does.
func halfDone(n int, outputs bool) []byte {
	st := chainState(n, outputs)
	now := time.Now()
	for _, id := range st.StepQueue[:n/2] {
		core.BeginTry(st, id, now, false)
		core.Record(st, id, core.Exit{}, core.Verdict{OK: true}, now)
		st.CurrentStep++
	}
	st.LastHeartbeatIso = planspec.FormatISO(now)
	return st.Marshal()
}

// BenchmarkChain measures chains of 100, 1,000 and 5,000 steps with agent `true`
// under check, with its notifier (the outbox and the feed) as `stepseq check`
// opens it, each next to its floor measured in the same run: per step one spawn
// of `true` from Go and one durable write of the state file (of the chain's mean
// size), the work no implementation can skip. cpu-µs/step is stepseq's own CPU
// (this process, not the agents) per step beyond the floor's.
func BenchmarkChain(b *testing.B) {
	for _, steps := range []int{100, 1000, 2000, 5000} {
		b.Run(fmt.Sprint(steps), func(b *testing.B) { benchChain(b, steps, false, driveCheck) })
	}
}

// BenchmarkSidecarChain: chains run by the sidecar (watch --exit-when-done),
// each step with two required outputs that exist already, so that the sidecar
// watches two paths a step besides following each step's report folder.
func BenchmarkSidecarChain(b *testing.B) {
	for _, steps := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprint(steps), func(b *testing.B) { benchChain(b, steps, true, driveSidecar) })
	}
}

func driveCheck(rt *Runtime) error {
	return (&Chain{Runtime: rt, OpenNotifier: checkNotifier(rt)}).Check(context.Background())
}

// checkNotifier opens the notifier `stepseq check` opens: no sinks of the
// plan's, the feed, the others' cursors kept; flushed and closed at the end.
func checkNotifier(rt *Runtime) func(*planspec.State) (Notifier, func()) {
	return func(*planspec.State) (Notifier, func()) {
		n, err := notify.New(notify.Config{Dir: rt.WS.Dir, KeepUnlisted: true, Logger: rt.Logger})
		if err != nil {
			panic(err)
		}
		return n, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = n.Flush(ctx)
			_ = n.Close(ctx)
		}
	}
}

func driveSidecar(rt *Runtime) error {
	sc, err := NewSidecar(rt, SidecarOptions{ExitWhenDone: true})
	if err != nil {
		return err
	}
	return sc.Run(context.Background())
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchChain(b *testing.B, steps int, outputs bool, drive func(*Runtime) error) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal("no true on PATH")
	}
	benchChainOf(b, steps, outputs, drive, chainAgent{path: truePath})
}

// chainAgent is the agent a benchmark's chain runs: a command (STEP_AGENT_CMD),
// or, with preset set, that preset found as path on PATH.
type chainAgent struct {
	path, preset string
}

func benchChainOf(b *testing.B, steps int, outputs bool, drive func(*Runtime) error, agent chainAgent) {
	truePath := agent.path
	var floor, chain, floorCPU, chainCPU time.Duration
	for b.Loop() {
		dir := b.TempDir()
		statePath := filepath.Join(dir, "state.json")
		half := halfDone(steps, outputs)
		if outputs {
			for _, id := range chainState(steps, false).StepQueue {
				for _, out := range chainOutputs(id) {
					if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(out)), 0o755); err != nil {
						b.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(dir, out), []byte("x\n"), 0o644); err != nil {
						b.Fatal(err)
					}
				}
			}
		}

		start, cpu := time.Now(), selfCPU()
		sf := &store.StateFile{Path: statePath}
		for i := range steps {
			// The same argv the chain gives its agent: the prompt as the last argument
			// (GNU true does a little more work when it has one).
			if err := exec.Command(truePath, chainPrompt(i)).Run(); err != nil {
				b.Fatal(err)
			}
			if err := sf.WriteBytes(half); err != nil {
				b.Fatal(err)
			}
		}
		floor += time.Since(start)
		floorCPU += selfCPU() - cpu

		initial := chainState(steps, outputs)
		if agent.preset != "" {
			initial.Settings.Agent = planspec.AgentSpec{Preset: agent.preset}
		}
		if err := os.WriteFile(statePath, initial.Marshal(), 0o644); err != nil {
			b.Fatal(err)
		}
		rt, err := NewRuntime(statePath, nil)
		if err != nil {
			b.Fatal(err)
		}
		rt.Getenv = func(k string) string {
			if k == "STEP_AGENT_CMD" && agent.preset == "" {
				return truePath
			}
			return ""
		}
		start, cpu = time.Now(), selfCPU()
		if err := drive(rt); err != nil {
			b.Fatal(err)
		}
		chain += time.Since(start)
		chainCPU += selfCPU() - cpu
		rt.Close()
		got, err := (&store.StateFile{Path: statePath}).Read()
		if err != nil || got.Status != planspec.StatusDone {
			b.Fatalf("chain did not finish: %v %+v", err, got)
		}
		lastChainSpend = got.Settings.Spend
	}
	n := float64(b.N) * float64(steps)
	b.ReportMetric(float64(floor.Microseconds())/n, "floor-µs/step")
	b.ReportMetric(float64(chain.Microseconds())/n, "chain-µs/step")
	b.ReportMetric(float64(chain)/float64(floor), "chain/floor")
	b.ReportMetric(float64((chainCPU-floorCPU).Microseconds())/n, "cpu-µs/step")
}
