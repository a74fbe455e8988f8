package planspec

import (
	"fmt"
	"testing"
)

// BenchmarkTrackedWrite: the encoding of one write of a chain's tracked state,
// at 100 and 5,000 steps, from halfway on. As in a chain, a step writes twice:
// once its try starts, once it is recorded, its two outputs among the
// artifacts and the cursor moved on. pieces is what a state file is written
// from; joined copies them into one buffer.
func BenchmarkTrackedWrite(b *testing.B) {
	for _, n := range []int{100, 5000} {
		for _, how := range []string{"pieces", "joined"} {
			b.Run(fmt.Sprintf("%d/%s", n, how), func(b *testing.B) { benchTrackedWrite(b, n, how == "joined") })
		}
	}
}

func benchTrackedWrite(b *testing.B, n int, joined bool) {
	var s *State
	started := false
	step := func() { // half a step: one write's change
		id := s.StepQueue[s.CurrentStep]
		r := s.Run(id)
		if started = !started; started {
			r.Status, r.Tries = StatusInProgress, r.Tries+1
			return
		}
		r.Status = StatusDone
		s.Artifacts = append(s.Artifacts, s.Steps[id].RequiredOutputs...)
		s.CurrentStep++
	}
	halfway := func() {
		s = trackedChain(n)
		for i, id := range s.StepQueue {
			s.Steps[id].RequiredOutputs = []string{fmt.Sprintf("out/%d/a.md", i), fmt.Sprintf("out/%d/b.md", i)}
		}
		for range n / 2 {
			step()
			s.MarshalPieces()
			step()
			s.MarshalPieces()
		}
	}
	halfway()
	size := 0
	for b.Loop() {
		if s.CurrentStep == n {
			b.StopTimer()
			halfway()
			b.StartTimer()
		}
		step()
		if joined {
			size = len(s.AppendMarshal(nil))
			continue
		}
		size = 0
		for _, p := range s.MarshalPieces() {
			size += len(p)
		}
	}
	b.ReportMetric(float64(size)/1e6, "MB/state")
}
