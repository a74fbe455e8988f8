package engine

import (
	"fmt"
	"strings"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/planspec"
)

// graphWaits is what a plan whose steps run side by side waits for: the
// steps whose agents run now, else what the next pass would decide, on a
// copy of the state.
func graphWaits(rt *Runtime, st *planspec.State, now time.Time, maxRetries int, scratch func(*planspec.State) *planspec.State) (Waiting, map[string]string, error) {
	var running []string
	if st.Status != planspec.StatusDone {
		for _, id := range st.StepQueue {
			if run := st.StepRuns[id]; run != nil && run.Status == planspec.StatusInProgress && stillRunning(rt.WS, id, run) {
				running = append(running, id)
			}
		}
	}
	busy := func(id string) bool {
		for _, r := range running {
			if r == id {
				return true
			}
		}
		return false
	}
	clone := scratch(st)
	conds, err := rt.lazyConditions(clone)
	if err != nil {
		return Waiting{Action: "invalid", Reason: "the state's conditions or paths are not valid; nothing runs until they are fixed"}, nil, err
	}
	pass := core.ReconcileGraph(clone, core.Facts{Now: now, MaxRetries: maxRetries,
		Cond: func(id, kind string) (bool, error) { return conds.Cond(now, id, kind) }},
		core.GraphFacts{Busy: busy, Slots: -1, Foreach: func(id string) ([]any, error) { return conds.Foreach(now, id) }})
	d := pass.Told
	w := Waiting{Action: d.Action.String(), Step: d.Step, Reason: d.Reason}
	var due []string
	held := map[string]string{}
	for _, dd := range pass.Decisions {
		if dd.Action == core.Launch {
			due = append(due, dd.Step)
		}
		if words, ok := heldWords(clone, dd, now); ok {
			held[dd.Step] = words
		}
	}
	switch {
	case len(running) > 0:
		w = Waiting{Action: core.Running.String(), Reason: "running side by side: " + strings.Join(running, ", ")}
		if len(due) > 0 {
			w.Reason += fmt.Sprintf("; due next: %s", strings.Join(due, ", "))
		}
	case d.Action == core.Idle:
		w.Reason = "plan DONE"
	case len(due) > 1:
		w.Step, w.Reason = "", "due: the next check or sidecar pass starts "+strings.Join(due, ", ")
	case d.Action == core.Launch:
		w.Reason = "due: the next check or sidecar pass starts it"
	}
	return w, held, nil
}

// graphStep fills in what a step of a graph shows: what it needs, the
// foreach it is an instance of, its branch. x is nil outside a graph.
func graphStep(s *StepReport, x *planspec.GraphIndex, st *planspec.State, id string) {
	if x == nil {
		return
	}
	s.Needs = x.NeedsOf(st, id)
	if spec := st.Steps[id]; spec != nil {
		s.Of = spec.Of
	}
	if run := st.StepRuns[id]; run != nil && run.Agent != nil && run.Agent.Worktree != nil {
		s.Branch = run.Agent.Worktree.Branch
	}
}
