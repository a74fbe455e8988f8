package planspec

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// fullEncoding is the state encoded as an untracked one: every run compared.
func fullEncoding(s *State) string {
	s.memo.track.on = false
	defer func() { s.memo.track.on = true }()
	return string(s.Marshal())
}

func trackedChain(n int) *State {
	s := NewState()
	for i := range n {
		id := fmt.Sprintf("s%02d", i)
		s.Steps[id] = &StepSpec{Title: "Step " + id, Instruction: "do " + id}
		s.StepQueue = append(s.StepQueue, id)
	}
	s.Track()
	return s
}

// A tracked state told of every change encodes as an untracked one, through a
// chain's writes, changes in the middle, runs removed and steps added.
//
// Every encoding's pieces are kept to the end, with the sections kept rather
// than copied however small: no later encoding may change a piece a writer
// could still be writing.
func TestTrack_EncodesAsFull(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := trackedChain(30)
	defer func(was int) { keepMin = was }(keepMin)
	keepMin = 0
	type encoding struct {
		what   string
		pieces [][]byte
		bytes  string
	}
	var encodings []encoding
	defer func() {
		for _, e := range encodings {
			if got := string(bytes.Join(e.pieces, nil)); got != e.bytes {
				t.Errorf("the pieces of the encoding after %s changed since:\n%s\nwas\n%s", e.what, got, e.bytes)
			}
		}
	}()
	check := func(what string) {
		t.Helper()
		s.Artifacts = append(s.Artifacts, fmt.Sprintf("out/%d.md", len(s.Artifacts)))
		if rng.IntN(8) == 0 {
			s.Artifacts = s.Artifacts[1:] // the list changed at its start: encoded anew
		}
		pieces := s.MarshalPieces()
		got := string(bytes.Join(pieces, nil))
		encodings = append(encodings, encoding{what, pieces, got})
		if want := fullEncoding(s); got != want {
			t.Fatalf("after %s: tracked encoding differs from the full one:\n%s\nwant\n%s", what, got, want)
		}
		if _, err := ParseState(strings.NewReader(got), "state.json"); err != nil {
			t.Fatalf("after %s: %v", what, err)
		}
	}
	check("nothing")
	for step := 0; step < 25; step++ {
		id := s.StepQueue[s.CurrentStep]
		r := s.Run(id) // a chain: the run at the cursor starts, then ends
		r.Status, r.Tries, r.LastRunIso = StatusInProgress, r.Tries+1, fmt.Sprintf("2026-01-01T00:00:%02d.000000+00:00", step)
		check("a try starts")
		out := "ok"
		r = s.Run(id)
		r.Status, r.Stdout = StatusDone, &out
		s.CurrentStep++
		check("a try ends")
		switch rng.IntN(5) {
		case 0: // an earlier run changes (a re-run asked for)
			s.Run(s.StepQueue[rng.IntN(s.CurrentStep)]).Tries += 10
			check("an earlier run changed")
		case 1: // changed through the map, and said so
			prev := s.StepQueue[rng.IntN(s.CurrentStep)]
			s.StepRuns[prev].Phase = PhaseBlocked
			s.Touch(prev)
			check("a run touched")
		case 2: // a plan edit: a step added, a pending run removed
			extra := fmt.Sprintf("x%02d", step)
			s.Steps[extra] = &StepSpec{Title: "Extra", Instruction: "more"}
			s.StepQueue = append(s.StepQueue, extra)
			s.Run(extra)
			delete(s.StepRuns, extra)
			s.TouchAll()
			check("a plan edit")
		}
	}
}

// A change the caller does not tell is not seen by a tracked state: the contract is
// real. Builds with the race detector catch it. (The run last in order is
// encoded anew every time; the change is to the one before it.)
func TestTrack_UntoldChangeIsCaught(t *testing.T) {
	s := trackedChain(3)
	s.Run("s00").Tries = 1
	s.CurrentStep = 1
	s.Run("s01")
	s.Marshal()
	s.Marshal()                 // s00 stood through an encoding: it is kept from now on
	s.StepRuns["s00"].Tries = 2 // not through Run, no Touch
	defer func() {
		if r := recover(); (r != nil) != checkTracking {
			t.Fatalf("recovered %v; want a panic exactly when tracking is checked (%v)", r, checkTracking)
		}
	}()
	got := string(s.Marshal())
	if !strings.Contains(got, `"tries": 1`) {
		t.Fatalf("an untold change was encoded, so the encoder compared everything:\n%s", got)
	}
}

// Touched names the runs changed since the last encoding, or says all.
func TestTrack_Touched(t *testing.T) {
	s := trackedChain(5)
	if _, all := s.Touched(); !all {
		t.Fatal("nothing encoded yet: want all")
	}
	s.Marshal()
	if ids, all := s.Touched(); all || len(ids) != 0 {
		t.Fatalf("after an encoding: %v, %v; want none", ids, all)
	}
	s.Run("s01").Tries = 1
	s.Touch("s03")
	s.Clone() // a copy for a reader does not count as the next write
	ids, all := s.Touched()
	slices.Sort(ids)
	if all || !slices.Equal(ids, []string{"s01", "s03"}) {
		t.Fatalf("Touched() = %v, %v; want [s01 s03], false", ids, all)
	}
	s.Marshal()
	s.TouchAll()
	if _, all := s.Touched(); !all {
		t.Fatal("after TouchAll: want all")
	}
	if _, all := NewState().Touched(); !all {
		t.Fatal("an untracked state: want all")
	}
}

// TestState_ReplaceSpecIsWritten: a spec replaced on a tracked state, as a
// try's rendering replaces it, is in the next encoding, and in the one after a
// second replacement (a loop's next round renders the step again).
func TestState_ReplaceSpecIsWritten(t *testing.T) {
	st, err := ParseState(strings.NewReader(`{"plan":{"steps":{"a":{"title":"A","instruction":"round ${round}","instructionTemplate":"round ${round}"}}},
		"stepQueue":["a"],"currentStep":0,"stepRuns":{},"stepDelayMinutes":0,"blockers":[],"status":"IN_PROGRESS"}`), "s")
	if err != nil {
		t.Fatal(err)
	}
	st.Track()
	_ = st.Marshal()
	for _, text := range []string{"round 1", "round 2"} {
		sp := *st.Steps["a"]
		sp.Instruction = text
		st.ReplaceSpec("a", &sp)
		st.Run("a").Tries++
		if out := string(st.Marshal()); !strings.Contains(out, `"instruction": "`+text+`"`) {
			t.Fatalf("after ReplaceSpec(%q) the state says:\n%s", text, out)
		}
	}
}
