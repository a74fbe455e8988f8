package core

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stepseq/stepseq/planspec"
	planpkg "github.com/stepseq/stepseq/planspec/plan"
)

// cpuTime is the CPU time the process has used: on a loaded machine a
// benchmark's wall time is mostly its wait for a CPU, so the figures are CPU
// time per operation beside it.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pump hands the machine one input and answers its writes and reads as a
// driver does, for benchmarks.
func pump(m *Machine, now time.Time, in Input) []Effect {
	var all []Effect
	queue := m.Handle(now, in)
	for len(queue) > 0 {
		e := queue[0]
		queue = queue[1:]
		all = append(all, e)
		switch e.(type) {
		case WriteState:
			queue = append(queue, m.Handle(now, Written{})...)
		case ReadState:
			queue = append(queue, m.Handle(now, StateRead{Unchanged: true})...)
		}
	}
	return all
}

// loopPlan1000 is a plan of 1,000 steps whose steps 500 to 502 are a repeat
// group, their instructions templates reading params, round, rounds and an
// earlier step's result, the last one's exit reading the first one's result.
func loopPlan1000(b *testing.B) *planspec.State {
	b.Helper()
	var sb strings.Builder
	sb.WriteString("name: bench\nparams:\n  max: {type: integer, default: 1000}\n  target: {type: string, default: src}\nsteps:\n")
	for i := range 1000 {
		switch i {
		case 500:
			sb.WriteString("  - id: loop\n    repeat: {max: params.max}\n    steps:\n")
			fallthrough
		case 501, 502:
			fmt.Fprintf(&sb, "      - id: g%d\n        title: Round ${round}\n        instruction: '[Round ${round}/${params.max}] Work on ${params.target} after ${len(rounds)} rounds; the step before was ${steps.s499.status}.'\n", i)
			if i == 502 {
				sb.WriteString("        exit: steps.g500.result.n == 0\n")
			}
		default:
			fmt.Fprintf(&sb, "  - id: s%d\n    title: S\n    instruction: do %d\n", i, i)
		}
	}
	p, err := planpkg.ParsePlan(strings.NewReader(sb.String()), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	st := p.State("plans/bench.yaml", "h")
	if st.Settings.Params, err = p.ResolveParams(nil); err != nil {
		b.Fatal(err)
	}
	return st
}

// BenchmarkReconcile_LoopDecision: one decision with templates and a loop on a
// 1,000-step state: the group's last step verified, its exit checked, the
// round kept and the next one started, the first step's title and instruction
// rendered for its launch.
func BenchmarkReconcile_LoopDecision(b *testing.B) {
	st := loopPlan1000(b)
	for i := range 500 {
		r := st.Run(st.StepQueue[i])
		r.Status, r.Tries, r.LastRunIso, r.Phase = planspec.StatusDone, 1, "2026-02-10T12:00:00.000000+00:00", planspec.PhaseDone
	}
	st.Settings.Loops = map[string]*planspec.Loop{"loop": {Round: 1, Max: 1000}}
	group := []string{"g500", "g501", "g502"}
	now := t0
	f := Facts{Now: now, MaxRetries: 3,
		Cond: func(id, kind string) (bool, error) { return StateCond(st, now, id, kind) },
		Render: func(id string) (*planspec.StepSpec, error) {
			return planpkg.RenderSpec(st.Steps[id], st.Settings.Agent, &planpkg.Env{Now: now, Runs: st.StepRuns, Step: id,
				Params: st.Settings.Params, Loop: st.LoopAround(id)})
		}}
	result := []byte(`{"n":3}`)
	b.ReportAllocs()
	cpu := cpuTime()
	for b.Loop() {
		for _, id := range group {
			r := st.Run(id)
			r.Status, r.Tries, r.Phase, r.Result = planspec.StatusDone, 1, planspec.PhaseDone, result
		}
		st.CurrentStep = 502
		if d, _ := Reconcile(st, f); d.Action != Launch || d.Step != "g500" {
			b.Fatalf("decision %v on %s (%s), want launch g500", d.Action, d.Step, d.Reason)
		}
		if st.Loop("loop").Round >= 1000 {
			st.Loop("loop").Round = 1
		}
	}
	b.StopTimer()
	cpu = cpuTime() - cpu
	if !strings.HasPrefix(st.Steps["g500"].Instruction, "[Round ") || len(st.Loop("loop").Rounds) != planspec.MaxRoundsKept {
		b.Fatalf("instruction %q, %d rounds kept", st.Steps["g500"].Instruction, len(st.Loop("loop").Rounds))
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/decision")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/decision")
}

// BenchmarkLoop_WriteAtRound: a loop of 200 rounds of three steps, each step
// answering a small result: at rounds 10 and 200 the size of state.json and
// the cost of one step's write (its run changed, the tracked state encoded).
// Past MaxRoundsKept the state stays the same size, so the write costs the same.
func BenchmarkLoop_WriteAtRound(b *testing.B) {
	plan := `
name: bound
steps:
  - id: loop
    repeat: {max: 200, onMax: done}
    steps:
      - {id: review, title: Review, instruction: "Review, round ${round}."}
      - {id: respond, title: Respond, instruction: "Fix what review-${round}.md says."}
      - {id: resolve, title: Resolve, instruction: "Verify the fixes."}
  - {id: after, title: After, instruction: Go on.}
`
	for _, at := range []int{10, 20, 200} {
		b.Run(fmt.Sprintf("round%d", at), func(b *testing.B) {
			p, err := planpkg.ParsePlan(strings.NewReader(plan), "plan.yaml")
			if err != nil {
				b.Fatal(err)
			}
			st, err := planspec.ParseStateBytes(p.State("plans/plan.yaml", "h").Marshal(), "state.json")
			if err != nil {
				b.Fatal(err)
			}
			lp := &loopProbe{fakeProbe{missing: map[string]bool{}, mtimes: map[string]time.Time{}}}
			m := NewMachine(MachineConfig{Driver: "bench", MaxRetries: 3, Persistent: true, Probe: lp})
			now := t0
			effs := pump(m, now, StateRead{State: st})
			for {
				s, ok := started(effs)
				if !ok {
					b.Fatal("the loop ended before the round")
				}
				if s.Step == "review" && m.State().Loop("loop").Round == at {
					break
				}
				pump(m, now, ReportIn{Step: s.Step, Try: s.Try, Report: good(planspec.WorkerReport{Status: planspec.ReportAccepted}), Via: "bench"})
				done := good(planspec.WorkerReport{Status: planspec.ReportDone, Result: []byte(`{"fixed_count":3,"doc_path":"review.md"}`)})
				pump(m, now, ReportIn{Step: s.Step, Try: s.Try, Report: done, Via: "bench"})
				now = now.Add(time.Second)
				effs = pump(m, now, AgentExited{Step: s.Step, Try: s.Try, Exit: Exit{Code: 0, Started: now.Add(-time.Second), Ended: now}})
			}
			st = m.State()
			size := len(st.Marshal())
			b.ReportAllocs()
			flip := false
			cpu := cpuTime()
			for b.Loop() {
				r := st.Run("review")
				if flip = !flip; flip {
					r.Phase = planspec.PhaseInProgress
				} else {
					r.Phase = planspec.PhaseDispatching
				}
				_ = st.MarshalPieces()
			}
			cpu = cpuTime() - cpu
			b.ReportMetric(float64(size), "state-bytes")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e3, "µs/write")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/1e3, "cpu-µs/write")
		})
	}
}
