package core

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/stepseq/stepseq/planspec"
	"github.com/stepseq/stepseq/planspec/plan"
)

// Steps side by side: a state whose steps carry their needs is run as a graph.
// Each pass looks at every queued step in queue order: one whose needs are DONE
// is decided as the cursor's step is in a straight line (its retries, gates,
// skips, delays, its template rendered), and every one that may launch does,
// up to the slots free. A step that fails for good holds only the steps that
// need it; continueOnFailure lets them go on. A foreach step whose needs are
// met is replaced in the queue by its instances. The cursor is kept at the
// first step not DONE, so that the original, given the file, runs the rest as
// a straight line.

// GraphFacts are what a pass over a graph must know beyond Facts.
type GraphFacts struct {
	// Busy reports whether a try of step id is in flight (dispatched,
	// running, being judged) or an earlier stepseq's agent still runs it.
	Busy func(id string) bool
	// Slots is how many more tries may launch; negative: no bound.
	Slots int
	// Foreach evaluates foreach step id's expression to its list.
	Foreach func(id string) ([]any, error)
}

// GraphPass is what a pass over a graph decided: every try to launch or
// step to wait on, in queue order, and the decision that sums it up.
type GraphPass struct {
	Decisions []Decision
	Told      Decision
	Running   int // steps in flight
	Changed   bool
	// Expanded: a foreach made its instances, steps the plan did not have.
	Expanded bool
}

// ReconcileGraph is Reconcile for a state whose steps run side by side.
func ReconcileGraph(st *planspec.State, f Facts, g GraphFacts) GraphPass {
	if st.Status == planspec.StatusDone {
		return GraphPass{Told: Decision{Action: Idle, Reason: "plan is DONE"}}
	}
	p := &graphPass{st: st, f: f, g: g, x: st.Index()}
	p.Changed = p.aggregate() // a verdict since the last pass: what needs it reads it
	p.scan()
	p.Changed = p.aggregate() || p.Changed
	p.Changed = p.cursor() || p.Changed
	p.sum()
	return p.GraphPass
}

type graphPass struct {
	GraphPass
	st *planspec.State
	f  Facts
	g  GraphFacts
	x  *planspec.GraphIndex
}

// scan decides every queued step in queue order.
func (p *graphPass) scan() {
	st := p.st
	for i := 0; i < len(st.StepQueue); {
		id := st.StepQueue[i]
		if p.g.Busy != nil && p.g.Busy(id) {
			p.Running++
			i++
			continue
		}
		if !p.needsMet(id) {
			i++
			continue
		}
		if d, ok := p.merge(id); ok {
			p.Decisions = append(p.Decisions, d)
			i++
			continue
		}
		if sp := st.Steps[id]; sp != nil && sp.Foreach != "" && sp.Of == "" {
			if d, held := p.expand(id); held {
				p.Decisions = append(p.Decisions, d)
				i++
			}
			p.x = st.Index()
			continue // the instances stand where the step stood
		}
		next, again := p.step(id)
		if !again {
			i++
		}
		if next.Action != Idle || next.Step != "" {
			p.Decisions = append(p.Decisions, next)
		}
	}
}

// step decides one step whose needs are met, as Reconcile decides the
// cursor's. again: decide it once more (its try failed before a launch, and
// the retry rule decides what follows). A zero decision: nothing to wait on.
func (p *graphPass) step(id string) (d Decision, again bool) {
	st, f := p.st, p.f
	if d, stop, ch := enterLoop(st, id, f); stop {
		p.Changed = p.Changed || ch
		return d, false
	} else if ch {
		p.Changed = true
	}
	if st.StepRuns[id] == nil && p.g.Slots == 0 {
		return Decision{}, false // it waits its turn, its record untouched
	}
	spec, run := st.Steps[id], st.Run(id)
	d, stop, interrupted, reoffer := p.byStatus(id, run)
	if stop {
		return d, false
	}
	if skipByCondition(id, run, f) {
		p.Changed = true
		if _, move, ch := afterDone(st, id, f); ch || move == loopMoved {
			p.Changed = true
		}
		return Decision{}, false
	}
	if d, held := heldBack(st, id, spec, run, f, reoffer); held {
		return d, false
	}
	if p.g.Slots == 0 {
		return Decision{}, false // it waits its turn
	}
	d, started, ch := startTry(st, id, spec, run, f, interrupted, reoffer)
	p.Changed = p.Changed || ch
	if !started {
		return Decision{}, true
	}
	if d.Action == Launch && p.g.Slots > 0 {
		p.g.Slots--
	}
	return d, false
}

// byStatus decides a step by its run's status, as Reconcile does the
// cursor's: stop when the decision is made (DONE, blocked, running), else
// whether its try was interrupted or is a pulled one offered again.
func (p *graphPass) byStatus(id string, run *planspec.StepRun) (d Decision, stop, interrupted, reoffer bool) {
	st, f := p.st, p.f
	switch run.Status {
	case planspec.StatusDone:
		d, _ = doneHolds(st, id)
		return d, true, false, false
	case planspec.StatusFailed:
		d, blocked, ch := failedTry(st, id, run, f)
		p.Changed = p.Changed || ch
		return d, blocked, false, false
	case planspec.StatusInProgress:
		var running bool
		d, running, interrupted, reoffer = unfinishedTry(st, id, run, f)
		if running {
			p.Running++
			return d, true, false, false
		}
		p.Changed = p.Changed || interrupted
	}
	return Decision{}, false, interrupted, reoffer
}

// doneHolds says whether a DONE step still holds what needs it: its abort
// held, or its loop reached max and blocks.
func doneHolds(st *planspec.State, id string) (Decision, bool) {
	g, at := st.GroupOf(id)
	var l *planspec.Loop
	if g != nil {
		l = st.Loop(g.ID)
	}
	return stillBlocked(st, id, g, l, g != nil && at == len(g.Steps)-1)
}

// needsMet reports whether every step id needs is DONE, or failed for good
// under continueOnFailure.
func (p *graphPass) needsMet(id string) bool {
	for _, n := range p.x.NeedsOf(p.st, id) {
		if !p.settled(n) {
			return false
		}
	}
	return true
}

// settled reports whether step n no longer holds what needs it: DONE (and
// not held there by an abort or a loop that blocks), or failed for good with
// continueOnFailure.
func (p *graphPass) settled(n string) bool {
	st := p.st
	run := st.StepRuns[n]
	if run == nil {
		return false
	}
	if run.Status == planspec.StatusDone {
		_, held := doneHolds(st, n)
		return !held && committed(st, n)
	}
	sp := st.Steps[n]
	return sp != nil && sp.ContinueOnFailure && FailedForGood(st, n, p.f.MaxRetries)
}

// FailedForGood reports whether step id failed and will not run again on its
// own: blocked by its worker, or out of tries.
func FailedForGood(st *planspec.State, id string, maxRetries int) bool {
	run := st.StepRuns[id]
	if run == nil || run.Status != planspec.StatusFailed && run.Phase != planspec.PhaseBlocked {
		return false
	}
	return run.Phase == planspec.PhaseBlocked || run.Tries >= RetryLimit(st, id, maxRetries)
}

// expand replaces foreach step id in the queue by its instances, once its
// needs are met. A list that cannot be had (not a list, over the cap, an
// expression that fails) blocks the step with the reason and launches
// nothing: held is true, and d says why.
func (p *graphPass) expand(id string) (d Decision, held bool) {
	st := p.st
	run := st.StepRuns[id]
	if run != nil && run.Status == planspec.StatusFailed && run.Phase == planspec.PhaseBlocked {
		return Decision{Action: Blocked, Step: id, Reason: workerBlocker(st, id)}, true
	}
	items, err := p.items(id)
	if err == nil {
		err = p.instances(id, items)
	}
	if err != nil {
		text := fmt.Sprintf("%s: foreach: %v", id, err)
		r := st.Run(id)
		r.Status, r.Phase, r.LastRunIso = planspec.StatusFailed, planspec.PhaseBlocked, planspec.FormatISO(p.f.Now)
		r.Error = &text
		newBlocker(st, text)
		p.Changed = true
		return Decision{Action: Blocked, Step: id, Reason: text}, true
	}
	p.Changed, p.Expanded = true, true
	return Decision{}, false
}

// items is foreach step id's list.
func (p *graphPass) items(id string) ([]any, error) {
	if p.g.Foreach != nil {
		return p.g.Foreach(id)
	}
	sp := p.st.Steps[id]
	return plan.EvalForeach(sp.Foreach, &plan.Env{Now: p.f.Now, Runs: p.st.StepRuns, Step: id,
		Vars: p.st.Settings.Vars, Params: p.st.Settings.Params})
}

// instances writes foreach step id's instances into the plan and the queue,
// in its place, each with its item and its texts rendered with it: what the
// original reads of an instance is plain text.
func (p *graphPass) instances(id string, items []any) error {
	st := p.st
	sp := st.Steps[id]
	ids := make([]string, len(items))
	specs := make([]*planspec.StepSpec, len(items))
	for i, item := range items {
		raw, err := json.Marshal(item)
		if err != nil {
			return fmt.Errorf("item %d cannot be kept as JSON: %v", i, err)
		}
		inst := *sp
		inst.Graph = sp.Graph.Clone()
		inst.Foreach, inst.Of, inst.Index, inst.Item = "", id, i, raw
		inst.RequiredOutputs = slices.Clone(sp.RequiredOutputs)
		ids[i], specs[i] = planspec.InstanceID(id, i), &inst
	}
	for i, inst := range specs {
		rendered, err := plan.RenderInstance(inst, st.Settings.Agent, &plan.Env{Now: p.f.Now, Runs: st.StepRuns,
			Step: ids[i], Vars: st.Settings.Vars, Params: st.Settings.Params})
		if err != nil {
			return fmt.Errorf("instance %s: %v", ids[i], err)
		}
		specs[i] = rendered
	}
	at := slices.Index(st.StepQueue, id)
	st.StepQueue = slices.Replace(slices.Clone(st.StepQueue), at, at+1, ids...)
	for i, inst := range specs {
		st.Steps[ids[i]] = inst
		delete(st.StepRuns, ids[i]) // a record left by an earlier expansion is not this instance's
	}
	r := st.Run(id)
	r.Status, r.Phase, r.Foreach, r.Error = planspec.StatusInProgress, planspec.PhaseInProgress, true, nil
	r.Result, r.Failed = nil, nil
	r.LastRunIso = planspec.FormatISO(p.f.Now)
	st.TouchAll()
	return nil
}

// aggregate keeps each foreach step's record: IN_PROGRESS while its
// instances run, DONE once every one is DONE or failed for good under
// continueOnFailure, with their results in order and the failed listed.
func (p *graphPass) aggregate() bool {
	st := p.st
	changed := false
	for of, insts := range p.foreachSteps() {
		done, failed := true, []string{}
		for _, inst := range insts {
			if run := st.StepRuns[inst]; run == nil || run.Status != planspec.StatusDone {
				if st.Steps[inst].ContinueOnFailure && FailedForGood(st, inst, p.f.MaxRetries) {
					failed = append(failed, inst)
					continue
				}
				done = false
			}
		}
		prev := st.StepRuns[of]
		status := planspec.StatusInProgress
		if done {
			status = planspec.StatusDone
		}
		results := p.x.ForeachResults(st, of)
		if prev != nil && prev.Status == status && slices.Equal(prev.Failed, failed) && string(prev.Result) == string(results) {
			continue
		}
		r := st.Run(of)
		r.Status, r.Foreach, r.Failed, r.Result = status, true, failed, results
		if done {
			r.Phase = planspec.PhaseDone
		}
		changed = true
	}
	return changed
}

// foreachSteps are the foreach steps that made their instances, with them.
func (p *graphPass) foreachSteps() map[string][]string {
	out := map[string][]string{}
	for id, sp := range p.st.Steps {
		if sp != nil && sp.Foreach != "" && p.x.Expanded(p.st, id) {
			out[id] = p.x.Instances[id]
		}
	}
	return out
}

// cursor puts currentStep on the first step not DONE, and the plan DONE when
// none is left to run.
func (p *graphPass) cursor() bool {
	st := p.st
	at, left, changed := len(st.StepQueue), false, false
	for i, id := range st.StepQueue {
		run := st.StepRuns[id]
		if run != nil && run.Status == planspec.StatusDone {
			continue
		}
		if at == len(st.StepQueue) {
			at = i
		}
		sp := st.Steps[id]
		if sp == nil || !sp.ContinueOnFailure || !FailedForGood(st, id, p.f.MaxRetries) {
			left = true
		} else if sp.Of == "" && !slices.Equal(run.Failed, []string{id}) {
			st.Run(id).Failed = []string{id} // steps.ID.failed names it for what goes on
			changed = true
		}
	}
	changed = changed || st.CurrentStep != at
	st.CurrentStep = at
	if !left && p.Running == 0 && !p.launches() {
		if u := unmerged(st, st.StepQueue); len(u) > 0 {
			// The branches no join merged are merged at the plan's end.
			p.Decisions = append(p.Decisions, Decision{Action: Merging, Merge: u, Reason: "merging the branches left at the plan's end"})
			return changed
		}
		st.Status = planspec.StatusDone
		changed = true
	}
	return changed
}

func (p *graphPass) launches() bool {
	return slices.ContainsFunc(p.Decisions, func(d Decision) bool { return d.Action == Launch })
}

// sum is the decision that stands for the pass: the first launch; else, with
// nothing in flight, the first wait or block; else what runs; done when the
// plan is.
func (p *graphPass) sum() {
	if p.st.Status == planspec.StatusDone {
		p.Told = Decision{Action: Idle, Reason: "no steps left"}
		return
	}
	var block, wait *Decision
	for i := range p.Decisions {
		d := &p.Decisions[i]
		switch d.Action {
		case Launch:
			p.Told = *d
			return
		case Blocked:
			if block == nil {
				block = d
			}
		case Running:
		case Merging:
			p.Told = *d
			return
		default:
			if wait == nil {
				wait = d
			}
		}
	}
	switch {
	case p.Running > 0:
		p.Told = Decision{Action: Running, Reason: "steps run side by side"}
	case wait != nil:
		p.Told = *wait
	case block != nil:
		p.Told = *block
	default:
		// Nothing runs, waits or blocks, and steps are left: they wait their
		// turn behind slots that are not free.
		p.Told = Decision{Action: Running, Reason: "waiting for a free agent slot"}
	}
}

// Held lists the queued steps that wait on a step failed for good, by the
// step that holds them: what a blocked branch holds, for status.
func Held(st *planspec.State, maxRetries int) map[string][]string {
	x := st.Index()
	out := map[string][]string{}
	for _, id := range st.StepQueue {
		for _, n := range x.NeedsOf(st, id) {
			sp := st.Steps[n]
			if FailedForGood(st, n, maxRetries) && (sp == nil || !sp.ContinueOnFailure) {
				out[n] = append(out[n], id)
			}
		}
	}
	return out
}

// Dependents are the queued steps that need step id, in queue order.
func Dependents(st *planspec.State, id string) []string {
	x := st.Index()
	var out []string
	for _, q := range st.StepQueue {
		if slices.Contains(x.NeedsOf(st, q), id) {
			out = append(out, q)
		}
	}
	return out
}

// merge is the Merging decision of join id, whose needs are met: the branches
// of its needs that wait for their merge. ok is false when there are none, or
// the join is past them (started, DONE, or blocked by a merge that failed).
func (p *graphPass) merge(id string) (Decision, bool) {
	st := p.st
	if run := st.StepRuns[id]; run != nil && (run.Status == planspec.StatusDone || run.Status == planspec.StatusInProgress ||
		run.Phase == planspec.PhaseBlocked) {
		return Decision{}, false
	}
	u := unmerged(st, p.x.NeedsOf(st, id))
	if len(u) == 0 {
		return Decision{}, false
	}
	return Decision{Action: Merging, Step: id, Merge: u, Reason: "merging the branches of " + strings.Join(u, ", ")}, true
}
