package planspec

import (
	"bytes"
	"fmt"
	"slices"
)

// runsClose ends a non-empty stepRuns object at depth one.
const runsClose = "\n  }"

// A tracked state is one whose caller tells the encoder what it changed, so that a
// write costs what changed, not the size of the plan: the runs section of the last
// encoding is kept, and only the runs from the first one changed onwards are encoded
// again. A chain changes the run at its cursor, near the end, so a write re-encodes
// one or two runs whatever the plan's length.
//
// The caller's word (Track): runs change only through Run(id) or after Touch(id);
// specs are replaced, never edited in place; steps and runs are added or removed
// only through Run(id), or followed by TouchAll. Builds with the race detector check
// every tracked encoding against a full one and panic on a difference, so that the
// test suite catches a change the caller did not tell.
type runTracker struct {
	on      bool
	all     bool            // TouchAll: the next encoding compares everything
	specs   bool            // ReplaceSpec: the next encoding compares the plan's specs
	encoded bool            // an encoding was made since Track
	touched map[string]bool // runs handed out or touched since the last encoding
	// head is the start of stepRuns at depth one: the runs of order before
	// len(starts), which stood through an encoding. Its bytes never change:
	// it only grows by appending, and is copied when it must shrink, since a
	// writer may still hold an earlier encoding's pieces. The runs after it,
	// and the closing brace, are encoded anew each time.
	head   []byte
	lines  bool           // head is one run a line (see oneLine)
	starts []int          // where each run of head begins
	order  []string       // the runs, in order
	pos    map[string]int // index of each id in order
}

// Track is the caller's word described on runTracker: the encoder then re-encodes
// only what the caller touched. It implies FreezeSpecs.
func (s *State) Track() {
	s.memo.freeze()
	s.memo.track.on = true
	s.memo.track.all = true
}

// Touch tells a tracked state that step id's run record changed, for a caller that
// changed it through StepRuns rather than Run.
func (s *State) Touch(id string) {
	t := &s.memo.track
	if !t.on {
		return
	}
	if t.touched == nil {
		t.touched = map[string]bool{}
	}
	t.touched[id] = true
}

// ReplaceSpec replaces step id's spec, as a try's rendering does,
// and tells a tracked state so: the next encoding writes the plan again, where
// the runs stay tracked.
func (s *State) ReplaceSpec(id string, sp *StepSpec) {
	s.Steps[id] = sp
	s.memo.track.specs = true
}

// TouchAll tells a tracked state that anything may have changed: steps added or
// removed, specs replaced, runs deleted. The next encoding compares everything.
func (s *State) TouchAll() { s.memo.track.all = true }

// Touched reports what changed in a tracked state's runs since its last encoding:
// the steps whose runs were handed out or touched, or all when anything may have
// (an untracked state, TouchAll, nothing encoded yet).
func (s *State) Touched() (ids []string, all bool) {
	t := &s.memo.track
	if !t.on || t.all || !t.encoded {
		return nil, true
	}
	ids = make([]string, 0, len(t.touched))
	for id := range t.touched {
		ids = append(ids, id)
	}
	return ids, false
}

// trackedRuns returns the stepRuns object at depth one in two pieces: head,
// the runs before the first touched one as kept from earlier encodings, and
// tail, the rest encoded anew. The run last in order stays in the tail: in a
// chain it is the cursor's, touched again by the next write.
func (s *State) trackedRuns() (head, tail []byte) {
	t := &s.memo.track
	defer func() { clear(t.touched); t.all, t.encoded = false, true }()
	first, ok := t.unchangedPrefix(s)
	if !ok {
		t.order = slices.Clone(s.runOrder())
		s.memo.lastRunOrder = t.order
		t.pos = make(map[string]int, len(t.order))
		for i, id := range t.order {
			t.pos[id] = i
		}
		first = 0
	}
	if len(t.order) == 0 {
		t.head, t.starts = nil, nil
		return nil, []byte("{}")
	}
	if lines := s.oneLine(); lines != t.lines {
		t.head, t.starts, t.lines = nil, nil, lines // head is of the other layout
	}
	keep := min(first, len(t.order)-1)
	if keep < len(t.starts) {
		// An earlier run changed: a new head, the old one left as it was.
		t.head, t.starts = slices.Clone(t.head[:t.starts[keep]]), t.starts[:keep]
	}
	// Sized first: grown run by run, a head of 10,000 runs would be allocated
	// over and over, five times its size in all.
	t.starts = slices.Grow(t.starts, keep-len(t.starts))
	t.head = slices.Grow(t.head, s.runsLen(t.order[len(t.starts):keep]))
	for i := len(t.starts); i < keep; i++ {
		t.starts = append(t.starts, len(t.head))
		t.head = s.appendRun(t.head, i, t.order[i])
	}
	tail = make([]byte, 0, s.runsLen(t.order[keep:])+len(runsClose))
	for i := keep; i < len(t.order); i++ {
		tail = s.appendRun(tail, i, t.order[i])
	}
	tail = append(tail, runsClose...)
	return t.head[:len(t.head):len(t.head)], tail
}

// appendRun appends the i-th run of stepRuns, id, with what goes before it.
func (s *State) appendRun(b []byte, i int, id string) []byte {
	if i == 0 {
		b = append(b, '{')
	} else {
		b = append(b, ',')
	}
	b = append(b, "\n    "...)
	b = appendString(b, id)
	b = append(b, ": "...)
	return append(b, s.memo.indentedRun(id, s.StepRuns[id], s.oneLine())...)
}

// runsLen is about the length appendRun gives the runs ids, enough for all but
// ids that need escaping.
func (s *State) runsLen(ids []string) int {
	n := 0
	for _, id := range ids {
		n += len(`,\n    "": `) + len(id) + len(s.memo.indentedRun(id, s.StepRuns[id], s.oneLine()))
	}
	return n
}

// unchangedPrefix returns how many runs of the last encoding stand unchanged, in
// place; ok is false when the order must be worked out again. A run new since then
// goes last when it is the cursor's, as runOrder places it.
func (t *runTracker) unchangedPrefix(s *State) (int, bool) {
	if t.all || !t.encoded {
		return 0, false
	}
	first := len(t.order)
	var added []string
	for id := range t.touched {
		p, ok := t.pos[id]
		switch {
		case !ok && s.StepRuns[id] != nil:
			added = append(added, id)
		case ok && s.StepRuns[id] == nil:
			return 0, false // removed without TouchAll: work it out again
		case ok:
			first = min(first, p)
		}
	}
	if len(t.order)+len(added) != len(s.StepRuns) {
		return 0, false
	}
	switch len(added) {
	case 0:
	case 1:
		if s.CurrentStep >= len(s.StepQueue) || s.StepQueue[s.CurrentStep] != added[0] {
			return 0, false
		}
		t.pos[added[0]] = len(t.order)
		t.order = append(t.order, added[0])
		s.memo.lastRunOrder = t.order
	default:
		return 0, false
	}
	return first, true
}

// checkTracked compares a tracked encoding with a full one.
func (s *State) checkTracked(head, tail []byte) {
	got := append(slices.Clip(head), tail...)
	var want bytes.Buffer
	s.writeRunsFull(&want, s.memo.track.order)
	if !bytes.Equal(got, want.Bytes()) {
		panic(fmt.Sprintf("planspec: a tracked state changed without telling it: stepRuns encoded as\n%s\nbut is\n%s", got, want.Bytes()))
	}
}
