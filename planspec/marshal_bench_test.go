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

// BenchmarkReadThenWrite: what a sidecar does first with a large state it
// finds: parse the file, then write it once with the cursor's run started.
// The state is of 1,000 and 12,000 steps of 4 KB instructions (about 4 and
// 50 MB), every run but the last DONE, as stepseq writes it. B/op is what the
// read and the write allocate, beside the file's size (state-MB).
func BenchmarkReadThenWrite(b *testing.B) {
	for _, n := range []int{1000, 12000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchReadThenWrite(b, n) })
	}
}

func benchReadThenWrite(b *testing.B, n int) {
	data := longState(n)
	b.ReportAllocs()
	for b.Loop() {
		st, err := ParseStateBytes(data, "state.json")
		if err != nil {
			b.Fatal(err)
		}
		st.Track()
		r := st.Run(st.StepQueue[n-1])
		r.Status, r.Tries = StatusInProgress, 1
		st.MarshalPieces()
	}
	b.ReportMetric(float64(len(data))/1e6, "state-MB")
}
