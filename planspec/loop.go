package planspec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Group is a repeat group: its steps, consecutive in stepQueue, run
// in order once per round until a step's exit holds or max rounds have run. It
// lives under stepseq.groups; the steps stay plain entries of plan.steps and
// stepQueue, so that the original scripts run them as a straight line.
type Group struct {
	ID    string `json:"id"`
	Title string `json:"title,omitempty"`
	// Max is the number of rounds: a number, or an expression evaluated when
	// the loop starts (params.max_rounds).
	Max string `json:"max"`
	// OnMax is what reaching Max does: OnMaxBlock (the default) or OnMaxDone.
	OnMax string   `json:"onMax,omitempty"`
	Steps []string `json:"steps"`
	// Totals are the group's running totals by name: what each finished
	// round adds, kept in its loop's Totals.
	Totals map[string]Total `json:"totals,omitempty"`
}

// What reaching a loop's max rounds does.
const (
	OnMaxBlock = "block"
	OnMaxDone  = "done"
)

// MaxRounds bounds a loop's rounds, whatever its max says.
const MaxRounds = 1000

// MaxRoundsKept bounds Loop.Rounds: the latest rounds are kept, the count of
// the older ones in Dropped. Ten is agent-sequencer's own ceiling on a review's
// rounds (and the review-rounds example's): every round of a loop that
// converges is kept for its summary, and a loop that runs on for hundreds of
// rounds keeps state.json the same size past the tenth.
const MaxRoundsKept = 10

// Loop is where a group's loop stands, under stepseq.loops by group id.
type Loop struct {
	Round int `json:"round"` // the round under way, from 1
	Max   int `json:"max"`   // Group.Max as evaluated when the loop started
	// Rounds are the finished rounds' run records, the oldest first, at most
	// MaxRoundsKept; Dropped counts the older ones no longer kept.
	Rounds  []RoundRecord `json:"rounds,omitempty"`
	Dropped int           `json:"roundsDropped,omitempty"`
	// Totals are the group's running totals over every finished round, by
	// name: a number, a count, a list, or the "error: …" that stopped one.
	Totals map[string]any `json:"totals,omitempty"`
	// Ended says how the loop ended: LoopExit, LoopMax or LoopAbort; "" while
	// it runs. Reason says why, for status and the journal.
	Ended  string `json:"ended,omitempty"`
	Reason string `json:"reason,omitempty"`

	// views are Rounds as conditions see them, decoded once: made where Rounds
	// are read or kept, never by an evaluation, so that evaluations only read.
	views []map[string]RunView
}

// How a loop ended.
const (
	LoopExit  = "exit"
	LoopMax   = "max"
	LoopAbort = "abort"
)

// RoundRecord is one finished round: step id → its run record.
type RoundRecord map[string]RoundRun

// RoundRun is a step's run record as a round keeps it: what a condition sees
// of it, without its output, reports or stepseq's try record.
type RoundRun struct {
	Status     string          `json:"status"`
	Tries      int             `json:"tries"`
	LastRunIso string          `json:"lastRunIso,omitempty"`
	Skipped    bool            `json:"skipped,omitempty"`
	Error      string          `json:"error,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
}

// KeepRound records the finished round of g: its steps' run records are added to
// the loop's rounds, the oldest dropped past MaxRoundsKept. A round kept
// already, which a re-run from inside the loop ran again, replaces its
// record; the record replaced is returned (nil when the round is new).
func (s *State) KeepRound(g *Group, l *Loop) (replaced RoundRecord) {
	rec := make(RoundRecord, len(g.Steps))
	for _, id := range g.Steps {
		r := s.StepRuns[id]
		if r == nil {
			rec[id] = RoundRun{Status: StatusPending}
			continue
		}
		rr := RoundRun{Status: r.Status, Tries: r.Tries, LastRunIso: r.LastRunIso, Skipped: r.Skipped, Result: r.Result}
		if r.Error != nil {
			rr.Error = *r.Error
		}
		rec[id] = rr
	}
	if last := len(l.Rounds) - 1; last >= 0 && l.Dropped+len(l.Rounds) >= l.Round {
		replaced, l.Rounds[last] = l.Rounds[last], rec
	} else {
		l.Rounds = append(l.Rounds, rec)
	}
	if over := len(l.Rounds) - MaxRoundsKept; over > 0 {
		l.Rounds = slices.Delete(l.Rounds, 0, over)
		l.Dropped += over
	}
	l.views = decodeRounds(l.Rounds) // a new slice: a clone may share the old one
	return replaced
}

func cloneLoops(ls map[string]*Loop) map[string]*Loop {
	if ls == nil {
		return nil
	}
	out := make(map[string]*Loop, len(ls))
	for id, l := range ls {
		c := *l
		c.Rounds = slices.Clone(l.Rounds)
		for i, rec := range c.Rounds {
			c.Rounds[i] = maps.Clone(rec)
		}
		c.Totals = cloneTotals(l.Totals)
		out[id] = &c
	}
	return out
}

// GroupOf is the group step id belongs to and its place in it (from 0); nil
// when it is in none.
func (s *State) GroupOf(id string) (*Group, int) {
	for i := range s.Settings.Groups {
		g := &s.Settings.Groups[i]
		if at := slices.Index(g.Steps, id); at >= 0 {
			return g, at
		}
	}
	return nil, -1
}

// Group is the group of that id; nil when there is none.
func (s *State) Group(id string) *Group {
	for i := range s.Settings.Groups {
		if s.Settings.Groups[i].ID == id {
			return &s.Settings.Groups[i]
		}
	}
	return nil
}

// Loop is where group id's loop stands; nil before it started.
func (s *State) Loop(id string) *Loop { return s.Settings.Loops[id] }

// LoopAround is the loop that step id's conditions and templates see: that of
// its own group, else that of the latest group the cursor has reached (for the
// steps after a loop and the summary); nil when there is none.
func (s *State) LoopAround(id string) *Loop {
	if len(s.Settings.Loops) == 0 {
		return nil
	}
	if g, _ := s.GroupOf(id); g != nil {
		return s.Settings.Loops[g.ID]
	}
	var latest *Loop
	at := -1
	for i := range s.Settings.Groups {
		g := &s.Settings.Groups[i]
		l := s.Settings.Loops[g.ID]
		if l == nil || len(g.Steps) == 0 {
			continue
		}
		if first := slices.Index(s.StepQueue, g.Steps[0]); first > at {
			latest, at = l, first
		}
	}
	return latest
}

// Progress is where step id stands in its loop: "round 2/5, step 1/3"; "" for
// a step in no group, or whose loop has not started. For no step (""), it is
// the round of the latest loop the plan reached: "round 3/5".
func (s *State) Progress(id string) string {
	g, at := s.GroupOf(id)
	if g == nil {
		if l := s.LoopAround(id); id == "" && l != nil && l.Round > 0 {
			return fmt.Sprintf("round %d/%d", l.Round, l.Max)
		}
		return ""
	}
	l := s.Settings.Loops[g.ID]
	if l == nil || l.Round == 0 {
		return ""
	}
	return fmt.Sprintf("round %d/%d, step %d/%d", l.Round, l.Max, at+1, len(g.Steps))
}

// RoundViews are the loop's rounds as conditions see them.
func RoundViews(l *Loop) []map[string]RunView {
	if l == nil {
		return nil
	}
	if len(l.views) == len(l.Rounds) {
		return l.views
	}
	return decodeRounds(l.Rounds)
}

func decodeRounds(rounds []RoundRecord) []map[string]RunView {
	out := make([]map[string]RunView, len(rounds))
	for i, rec := range rounds {
		m := make(map[string]RunView, len(rec))
		for id, rr := range rec {
			v := RunView{Status: rr.Status, Tries: rr.Tries, LastRunIso: rr.LastRunIso, Skipped: rr.Skipped, Error: rr.Error}
			if len(rr.Result) > 0 {
				_ = json.Unmarshal(rr.Result, &v.Result)
			}
			m[id] = v
		}
		out[i] = m
	}
	return out
}

// groups reads stepseq.groups.
func (d *stateDecoder) groups(key string, raw json.RawMessage) []Group {
	var gs []Group
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&gs); err != nil {
		d.fail(key, "want a list of groups, each {id, title, max, onMax, steps, totals}: %v", err)
		return nil
	}
	return gs
}

// loops reads stepseq.loops.
func (d *stateDecoder) loops(key string, raw json.RawMessage) map[string]*Loop {
	var ls map[string]*Loop
	if err := json.Unmarshal(raw, &ls); err != nil {
		d.fail(key, "want an object of group ids to loops {round, max, rounds}: %v", err)
		return nil
	}
	for id, l := range ls {
		if l == nil {
			delete(ls, id)
			continue
		}
		l.views = decodeRounds(l.Rounds)
	}
	return ls
}

// checkGroups refuses groups the machine could not run: each names consecutive
// ids of stepQueue, a step is in one group at most, and max and onMax are known.
func (d *stateDecoder) checkGroups(st *State) {
	in, totals := map[string]string{}, map[string]string{}
	for i, g := range st.Settings.Groups {
		key := fmt.Sprintf("stepseq.groups[%d]", i)
		d.checkTotals(key, &g, totals)
		if g.ID == "" {
			d.fail(key+".id", "want the group's id")
		}
		if strings.TrimSpace(g.Max) == "" {
			d.fail(key+".max", "want the number of rounds, or an expression giving it")
		}
		if g.OnMax != "" {
			if err := CheckWord(g.OnMax, OnMaxWords); err != nil {
				d.fail(key+".onMax", "%v", err)
			}
		}
		if len(g.Steps) == 0 {
			d.fail(key+".steps", "want the group's step ids, consecutive in stepQueue")
			continue
		}
		first := slices.Index(st.StepQueue, g.Steps[0])
		for j, id := range g.Steps {
			if other, dup := in[id]; dup {
				d.fail(fmt.Sprintf("%s.steps[%d]", key, j), "step %q is in group %q already: a step is in one group at most", id, other)
			}
			in[id] = g.ID
			if first < 0 || first+j >= len(st.StepQueue) || st.StepQueue[first+j] != id {
				d.fail(fmt.Sprintf("%s.steps[%d]", key, j), "step %q is not where the group needs it: a group's steps are consecutive in stepQueue, in its order", id)
				break
			}
		}
	}
	for id, l := range st.Settings.Loops {
		if st.Group(id) == nil {
			d.fail("stepseq.loops."+id, "no group %q in stepseq.groups", id)
		} else if l.Round < 0 || l.Max < 0 {
			d.fail("stepseq.loops."+id, "want round and max ≥ 0")
		}
	}
}

func cloneGroups(gs []Group) []Group {
	if gs == nil {
		return nil
	}
	out := slices.Clone(gs)
	for i := range out {
		out[i].Steps = slices.Clone(out[i].Steps)
		out[i].Totals = maps.Clone(out[i].Totals)
	}
	return out
}

// RunView is a step's run record as a condition sees it.
type RunView struct {
	Status     string `expr:"status"`
	Tries      int    `expr:"tries"`
	LastRunIso string `expr:"lastRunIso"`
	Error      string `expr:"error"`
	Stdout     string `expr:"stdout"`
	Skipped    bool   `expr:"skipped"`
	Result     any    `expr:"result"` // the accepted result of the last done report; nil when none
	// Results are a foreach step's instances' results in order (its result
	// too); for another step, its result as a list of one, or empty.
	Results []any `expr:"results"`
	// Failed are the instances (or the step itself) that failed for good
	// under continueOnFailure.
	Failed []string `expr:"failed"`
}
