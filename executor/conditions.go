package executor

import (
	"errors"
	"time"

	"github.com/stepseq/stepseq/planspec"
)

// Conditions are a state's compiled when, skip and check, bound to the workspace.
type Conditions struct {
	compiled *planspec.Compiled
	rt       *Runtime
	st       *planspec.State
}

// Conditions compiles st's expressions. Errors name the state file and the key.
func (r *Runtime) Conditions(st *planspec.State) (*Conditions, error) {
	compiled, err := st.Compile()
	if err != nil {
		var errs planspec.StateErrors
		if errors.As(err, &errs) {
			for _, e := range errs {
				e.File = r.WS.State
			}
		}
		return nil, err
	}
	return &Conditions{compiled: compiled, rt: r, st: st}, nil
}

func (c *Conditions) env(id string) *planspec.Env {
	return &planspec.Env{
		Root:       c.rt.Root(),
		Now:        c.rt.now(),
		TryStarted: tryStarted(c.st.StepRuns[id]),
		Runs:       c.st.StepRuns,
		Step:       id,
		Vars:       c.st.Settings.Vars,
		Getenv:     c.rt.Getenv,
	}
}

// tryStarted is when the step's current (or last) try started: fresh(p) compares
// with it.
func tryStarted(run *planspec.StepRun) time.Time {
	if run == nil {
		return time.Time{}
	}
	ref := run.LastRunIso
	if run.Agent != nil && run.Agent.StartedIso != "" {
		ref = run.Agent.StartedIso
	}
	t, _ := planspec.ParseISO(ref)
	return t
}

// Cond evaluates step id's "when" (true when unset) or "skip" (false when unset).
func (c *Conditions) Cond(id, kind string) (bool, error) {
	if c == nil {
		return kind == "when", nil
	}
	var cond *planspec.Condition
	switch kind {
	case "when":
		cond = c.compiled.When[id]
	case "skip":
		cond = c.compiled.Skip[id]
	}
	if cond == nil {
		return kind == "when", nil
	}
	return cond.Eval(c.env(id))
}

// Check returns step id's check as a function for Judge, or nil when it has none.
func (c *Conditions) Check(id string) func() (bool, error) {
	if c == nil {
		return nil
	}
	cond := c.compiled.Check[id]
	if cond == nil {
		return nil
	}
	return func() (bool, error) { return cond.Eval(c.env(id)) }
}

// Compiled exposes the compiled conditions, for deriving what to watch.
func (c *Conditions) Compiled() *planspec.Compiled { return c.compiled }
