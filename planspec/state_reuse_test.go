package planspec

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// The indenter stopped at any size of part writes what appendIndented writes
// in one go, and indentedLen tells its length and whether it is raw itself.
func TestIndenter_Parts(t *testing.T) {
	samples := append(slices.Clone(layoutSamples), `{"long":"`+strings.Repeat(`ab\"c`, 40)+`","l":[{"x":"`+strings.Repeat("y", 70)+`"}]}`)
	for _, raw := range samples {
		for _, flat := range []int{0, 1, 2, maxDepth} {
			for depth := range 3 {
				want := appendIndented(nil, []byte(raw), depth, flat)
				for limit := 1; limit <= len(want)+1; limit++ {
					in := indenter{raw: []byte(raw), depth: depth, flat: flat}
					var got []byte
					for !in.done() {
						got = append(got, in.appendTo(nil, limit)...)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("%s, depth %d, flat %d, parts of %d:\n%s\nwant\n%s", raw, depth, flat, limit, got, want)
					}
				}
				n, same := indentedLen([]byte(raw), depth, flat)
				if n != len(want) || same != (string(want) == raw) {
					t.Errorf("%s, depth %d, flat %d: indentedLen %d, %v; want %d, %v", raw, depth, flat, n, same, len(want), string(want) == raw)
				}
				// Indented already: indented is raw itself, not a copy.
				if got := indented(want, depth, flat); !bytes.Equal(got, want) || &got[0] != &want[0] {
					t.Errorf("%s, depth %d, flat %d: indented again is a copy", raw, depth, flat)
				}
			}
		}
	}
}

// longState is an n-step chain of 4 KB instructions, every run DONE but the
// cursor's, as stepseq writes it.
func longState(n int) []byte {
	s := trackedChain(n)
	note := strings.Repeat(" Read the notes and cite them.", 4096/30)
	for i, id := range s.StepQueue {
		s.Steps[id].Instruction += note
		if i < n-1 {
			r := s.Run(id)
			r.Status, r.Tries, r.LastRunIso = StatusDone, 1, "2026-02-10T21:30:31.123456+00:00"
		}
	}
	s.CurrentStep = n - 1
	return s.Marshal()
}

// A state read from a file stepseq wrote is written again from the file's own
// bytes: the plan and the runs as they are in it, not copies, so that the
// file is not held twice, and a tracked state keeps no copies of its specs.
// Both layouts: indented (a small plan) and one record a line.
func TestState_WriteSharesFileBytes(t *testing.T) {
	for _, n := range []int{50, linesFrom + 10} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			data := longState(n)
			st, err := ParseStateBytes(data, "state.json")
			if err != nil {
				t.Fatal(err)
			}
			st.Track()
			if st.memo.planSteps != nil {
				t.Errorf("a tracked state keeps %d copies of its specs", len(st.memo.planSteps))
			}
			r := st.Run(st.StepQueue[n-1])
			r.Status, r.Tries = StatusInProgress, 1
			pieces := st.MarshalPieces()
			plan := st.memo.indentedPlan(st.oneLine())
			if !within(plan, data) {
				t.Errorf("the plan (%d bytes) is written from a copy, not from the file read", len(plan))
			}
			id := st.StepQueue[0]
			if run := st.memo.indentedRun(id, st.StepRuns[id], st.oneLine()); !within(run, data) {
				t.Errorf("run %s is written from a copy, not from the file read:\n%s", id, run)
			}
			var out []byte
			for _, p := range pieces {
				out = append(out, p...)
			}
			if full := st.Clone().Marshal(); !bytes.Equal(out, full) {
				t.Fatalf("written from the file's bytes:\n%.2000s\nwant\n%.2000s", out, full)
			}
		})
	}
}

// within reports whether b lies in data's memory, not only equal to a part of it.
func within(b, data []byte) bool {
	i := bytes.Index(data, b)
	for i >= 0 {
		if &data[i] == &b[0] {
			return true
		}
		next := bytes.Index(data[i+1:], b)
		if next < 0 {
			return false
		}
		i += 1 + next
	}
	return false
}

// Reading a large state and writing it once, as a sidecar starting on it
// does, allocates less than twice the file's size: the parse, and the runs
// written anew. Re-indenting the plan into a buffer grown step by step cost
// six times the file.
func TestState_ReadThenWriteAllocates(t *testing.T) {
	data := longState(linesFrom + 200)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	st, err := ParseStateBytes(data, "state.json")
	if err != nil {
		t.Fatal(err)
	}
	st.Track()
	r := st.Run(st.StepQueue[len(st.StepQueue)-1])
	r.Status, r.Tries = StatusInProgress, 1
	st.MarshalPieces()
	runtime.ReadMemStats(&after)
	if got, most := after.TotalAlloc-before.TotalAlloc, 2*uint64(len(data)); got > most {
		t.Errorf("a read and a write of a %d KiB state allocated %d KiB, over %d KiB", len(data)>>10, got>>10, most>>10)
	}
}
