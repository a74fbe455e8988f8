package core

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stepseq/stepseq/planspec"
	"github.com/stepseq/stepseq/planspec/plan"
)

// Loops: a repeat group's steps run in order once per round. The
// state stays the original's flat stepQueue: a new round sets the group's steps
// back to PENDING and the cursor back to its first step, and the loop's round
// and finished rounds live under stepseq.loops. Exit and abort are checked once,
// as the cursor leaves a verified step.

// LoopEvent is a loop's round starting or its end, for the journal and the user.
type LoopEvent struct {
	Kind   string // LoopRound or LoopLeft
	Group  string
	Step   string // the step the round starts at, or whose exit or abort held
	Round  int
	Max    int
	How    string // LoopLeft: planspec.LoopExit, LoopMax or LoopAbort; "" for an exit outside a loop
	Reason string
}

// Kinds of LoopEvent, as the journal names them.
const (
	LoopRound = "round"
	LoopLeft  = "loop-exit"
)

// loopMove is what the cursor does past a verified step.
type loopMove int

const (
	loopOn    loopMove = iota // to the next step, as for any step
	loopMoved                 // the loop put it where it goes
	loopStop                  // the plan stops here: the decision says why
)

// enterLoop starts round 1 of the group whose first step is id, when its loop
// has not started: max is evaluated once, now. A max that cannot be evaluated
// blocks the plan.
func enterLoop(st *planspec.State, id string, f Facts) (Decision, bool, bool) {
	g, at := st.GroupOf(id)
	if g == nil || at != 0 || st.Loop(g.ID) != nil {
		return Decision{}, false, false
	}
	max, err := plan.LoopMax(st, g)
	if err != nil {
		text := g.ID + ": " + err.Error()
		return Decision{Action: Blocked, Step: id, Reason: text}, true, newBlocker(st, text)
	}
	if st.Settings.Loops == nil {
		st.Settings.Loops = map[string]*planspec.Loop{}
	}
	st.Settings.Loops[g.ID] = &planspec.Loop{Round: 1, Max: max}
	tell(f, LoopEvent{Kind: LoopRound, Group: g.ID, Step: id, Round: 1, Max: max,
		Reason: fmt.Sprintf("%s: round 1/%d starts", g.ID, max)})
	return Decision{}, false, true
}

// afterDone decides where the cursor goes past the verified step id: abort
// blocks the plan, exit leaves the loop (outside one, ends the plan DONE), the
// group's last step starts the next round, or reaching max ends the loop as
// onMax says.
func afterDone(st *planspec.State, id string, f Facts) (Decision, loopMove, bool) {
	spec := st.Steps[id]
	g, at := st.GroupOf(id)
	var l *planspec.Loop
	if g != nil {
		l = st.Loop(g.ID)
	}
	last := g != nil && at == len(g.Steps)-1
	if d, blocked := stillBlocked(st, id, g, l, last); blocked {
		return d, loopStop, false
	}
	if spec == nil {
		return Decision{}, loopOn, false
	}
	// A step its skip marked DONE was not verified: its exit and abort are not
	// asked, and the round goes on.
	verified := !st.Run(id).Skipped
	if verified && spec.Abort != "" {
		if d, move, changed, held := abortHolds(st, id, g, l, f); held {
			return d, move, changed
		}
	}
	if verified && spec.Exit != "" && (l == nil || l.Ended == "") {
		ok, err := cond(f, id, plan.CondExit)
		if err != nil {
			return blockOn(st, id, fmt.Sprintf("%s: exit: %v", id, err))
		}
		if ok {
			leave(st, id, g, at, l, f)
			return Decision{}, loopMoved, true
		}
	}
	if l == nil || l.Ended != "" || !last {
		return Decision{}, loopOn, false
	}
	return endRound(st, id, g, l, f)
}

// stillBlocked says whether the plan stays blocked on step id, DONE before:
// its loop, of which it is the last step, reached max and blocks, or its abort
// held.
func stillBlocked(st *planspec.State, id string, g *planspec.Group, l *planspec.Loop, last bool) (Decision, bool) {
	switch {
	case l != nil && l.Ended == planspec.LoopMax && last && g.OnMax != planspec.OnMaxDone:
		return Decision{Action: Blocked, Step: id, Reason: g.ID + ": " + l.Reason}, true
	case hasBlocker(st, id+": aborted"):
		return Decision{Action: Blocked, Step: id, Reason: workerBlocker(st, id)}, true
	}
	return Decision{}, false
}

// abortHolds asks step id's abort. When it holds, or cannot be evaluated, the
// plan is blocked and the step's loop, if it runs, ends aborted; held is false
// when it does not hold.
func abortHolds(st *planspec.State, id string, g *planspec.Group, l *planspec.Loop, f Facts) (d Decision, move loopMove, changed, held bool) {
	ok, err := cond(f, id, plan.CondAbort)
	if err != nil {
		d, move, changed = blockOn(st, id, fmt.Sprintf("%s: abort: %v", id, err))
		return d, move, changed, true
	}
	if !ok {
		return Decision{}, loopOn, false, false
	}
	text := abortText(st, id, f)
	if l != nil && l.Ended == "" {
		l.Ended, l.Reason = planspec.LoopAbort, text
	}
	ev := LoopEvent{Kind: LoopLeft, Step: id, How: planspec.LoopAbort, Reason: text}
	if l != nil {
		ev.Group, ev.Round, ev.Max = g.ID, l.Round, l.Max
	}
	tell(f, ev)
	d, move, changed = blockOn(st, id, text)
	return d, move, changed, true
}

// endRound is the group's last step verified, its loop still running: the
// round is kept, and the next one starts, or max ends the loop, which blocks
// the plan unless onMax says done.
func endRound(st *planspec.State, id string, g *planspec.Group, l *planspec.Loop, f Facts) (Decision, loopMove, bool) {
	keepRound(st, g, l)
	if l.Round < l.Max {
		nextRound(st, g, l)
		tell(f, LoopEvent{Kind: LoopRound, Group: g.ID, Step: g.Steps[0], Round: l.Round, Max: l.Max,
			Reason: fmt.Sprintf("%s: round %d/%d starts", g.ID, l.Round, l.Max)})
		return Decision{}, loopMoved, true
	}
	l.Ended, l.Reason = planspec.LoopMax, fmt.Sprintf("did not converge in %s", countOf(l.Max, "round"))
	ev := LoopEvent{Kind: LoopLeft, Group: g.ID, Step: id, Round: l.Round, Max: l.Max, How: planspec.LoopMax}
	if g.OnMax == planspec.OnMaxDone {
		ev.Reason = fmt.Sprintf("%s: %s (onMax: done): the plan goes on", g.ID, l.Reason)
		tell(f, ev)
		return Decision{}, loopOn, true
	}
	ev.Reason = g.ID + ": " + l.Reason
	tell(f, ev)
	addBlocker(st, ev.Reason)
	return Decision{Action: Blocked, Step: id, Reason: ev.Reason}, loopStop, true
}

// leave is step id's exit holding: the rest of the round is skipped and the
// cursor goes past the group; outside a loop, the rest of the plan is skipped
// and the plan ends DONE.
func leave(st *planspec.State, id string, g *planspec.Group, at int, l *planspec.Loop, f Facts) {
	spec := st.Steps[id]
	now := planspec.FormatISO(f.Now)
	skip := func(ids []string) {
		for _, sid := range ids {
			run := st.Run(sid)
			if run.Status == planspec.StatusDone {
				continue
			}
			run.Status, run.Phase, run.Skipped, run.LastRunIso = planspec.StatusDone, planspec.PhaseDone, true, now
		}
	}
	if g == nil || l == nil {
		skip(st.StepQueue[st.CurrentStep+1:])
		st.CurrentStep = len(st.StepQueue)
		tell(f, LoopEvent{Kind: LoopLeft, Step: id,
			Reason: fmt.Sprintf("%s: exit: %s holds: the plan ends DONE", id, spec.Exit)})
		return
	}
	skip(g.Steps[at+1:])
	l.Ended = planspec.LoopExit
	l.Reason = fmt.Sprintf("exit: %s held after %s in round %d", spec.Exit, id, l.Round)
	keepRound(st, g, l)
	st.CurrentStep = slices.Index(st.StepQueue, g.Steps[len(g.Steps)-1]) + 1
	tell(f, LoopEvent{Kind: LoopLeft, Group: g.ID, Step: id, Round: l.Round, Max: l.Max, How: planspec.LoopExit,
		Reason: g.ID + ": " + l.Reason})
}

// keepRound records the round g's loop just finished, and adds it to the
// group's running totals: both in the state write that moves the cursor past
// the round, so that a restart neither loses the round nor counts it twice. A
// round a re-run ran again replaces its earlier run, in both.
func keepRound(st *planspec.State, g *planspec.Group, l *planspec.Loop) {
	plan.KeepTotals(g, l, st.KeepRound(g, l))
}

// nextRound sets the group's steps back to PENDING, as a new run of them, and
// the cursor on its first step.
func nextRound(st *planspec.State, g *planspec.Group, l *planspec.Loop) {
	for _, sid := range g.Steps {
		run := st.Run(sid)
		run.Status, run.Phase = planspec.StatusPending, planspec.PhasePlanned
		run.Agent, run.Reports, run.Result = runAnew(run.Agent, run.Tries), nil, nil
		run.Tries, run.Error, run.Stdout, run.Skipped = 0, nil, nil, false
		clearBlocker(st, sid)
	}
	l.Round++
	st.CurrentStep = slices.Index(st.StepQueue, g.Steps[0])
}

// unconverged is the group whose last step is id and its loop, when the loop
// reached max and blocked the plan; nil otherwise.
func unconverged(st *planspec.State, id string) (*planspec.Group, *planspec.Loop) {
	g, at := st.GroupOf(id)
	if g == nil || at != len(g.Steps)-1 || g.OnMax == planspec.OnMaxDone {
		return nil, nil
	}
	if l := st.Loop(g.ID); l != nil && l.Ended == planspec.LoopMax {
		return g, l
	}
	return nil, nil
}

// resetLoops forgets the loops of the groups a re-run from queue index at runs
// again: those from at on start over at round 1; one that at is inside goes on
// in its round.
func resetLoops(st *planspec.State, at int) {
	for i := range st.Settings.Groups {
		g := &st.Settings.Groups[i]
		l := st.Loop(g.ID)
		if l == nil || len(g.Steps) == 0 {
			continue
		}
		first := slices.Index(st.StepQueue, g.Steps[0])
		switch {
		case first >= at:
			delete(st.Settings.Loops, g.ID)
		case first+len(g.Steps) > at:
			l.Ended, l.Reason = "", ""
		}
	}
	for _, b := range slices.Clone(st.Blockers) {
		for i := range st.Settings.Groups {
			if g := &st.Settings.Groups[i]; st.Loop(g.ID) == nil && strings.HasPrefix(b, g.ID+": ") {
				clearBlocker(st, g.ID)
			}
		}
	}
}

func blockOn(st *planspec.State, id, text string) (Decision, loopMove, bool) {
	changed := newBlocker(st, text)
	return Decision{Action: Blocked, Step: id, Reason: text}, loopStop, changed
}

// newBlocker records a blocker line once, and says whether it is new.
func newBlocker(st *planspec.State, text string) bool {
	if slices.Contains(st.Blockers, text) {
		return false
	}
	addBlocker(st, text)
	return true
}

func hasBlocker(st *planspec.State, prefix string) bool {
	return slices.ContainsFunc(st.Blockers, func(b string) bool { return strings.HasPrefix(b, prefix) })
}

func tell(f Facts, ev LoopEvent) {
	if f.Loop != nil {
		f.Loop(ev)
	}
}

// abortsFirst asks the abort of step id before its first try: an abort that
// can be evaluated then (it reads params, vars, other steps or files, not the
// step's own result) and holds blocks the plan before anything runs, the
// first step's included. One that cannot be evaluated yet waits for the step
// to be verified, when afterDone asks it.
func abortsFirst(st *planspec.State, id string, spec *planspec.StepSpec, run *planspec.StepRun, f Facts) (Decision, bool, bool) {
	if spec == nil || spec.Abort == "" || run.Tries > 0 || len(run.Result) > 0 {
		return Decision{}, false, false
	}
	ok, err := cond(f, id, plan.CondAbort)
	if err != nil || !ok {
		return Decision{}, false, false
	}
	d, _, changed := blockOn(st, id, abortText(st, id, f))
	return d, true, changed
}

// abortText is the blocker of step id's abort: its reason rendered, else the
// condition that held.
func abortText(st *planspec.State, id string, f Facts) string {
	spec := st.Steps[id]
	if spec.AbortReason != "" {
		reason := spec.AbortReason
		if t, err := plan.CompileTemplate(reason); err == nil {
			if text, err := t.Render(stateEnv(st, f.Now, id)); err == nil {
				reason = text
			}
		}
		return fmt.Sprintf("%s: aborted: %s", id, reason)
	}
	return fmt.Sprintf("%s: aborted: abort: %s holds", id, spec.Abort)
}
