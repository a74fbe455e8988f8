package engine

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/stepseq/stepseq/planspec"
	planpkg "github.com/stepseq/stepseq/planspec/plan"
)

// Conditions are a state's compiled when, skip and check, bound to the workspace.
type Conditions struct {
	compiled *planpkg.Compiled
	// lazy, instead of compiled, compiles a condition when it is first asked for.
	lazy *planpkg.LazyConditions
	rt   *Runtime
	st   *planspec.State
}

// Conditions compiles st's expressions. Errors name the state file and the key.
func (r *Runtime) Conditions(st *planspec.State) (*Conditions, error) {
	compiled, err := planpkg.Compile(st)
	if err != nil {
		return nil, r.inStateFile(err)
	}
	c := &Conditions{compiled: compiled, rt: r, st: st}
	if st.Settings.Face == "" {
		return c, nil
	}
	var errs planspec.StateErrors
	for _, id := range slices.Sorted(maps.Keys(st.Steps)) {
		for _, kind := range []string{planpkg.CondWhen, planpkg.CondSkip, planpkg.CondCheck, planpkg.CondExit, planpkg.CondAbort} {
			cond, _ := c.condition(id, kind)
			errs = append(errs, c.unexposed(id, kind, cond)...)
		}
	}
	if len(errs) > 0 {
		return nil, r.inStateFile(errs)
	}
	return c, nil
}

// unexposed refuses a condition of a run that arrived through a face when it
// reads a name of the environment the operator did not expose (--expose-env):
// checked when the conditions a driver runs are compiled, so that a run
// started under another list, or a state edited to read more, runs nothing and
// says why. A report's conditions (lazyConditions) are not refused: a reader
// in another process does not know the sidecar's list, and its env() of such a
// name gives nothing.
func (c *Conditions) unexposed(id, kind string, cond *planpkg.Condition) planspec.StateErrors {
	if cond == nil || c.st.Settings.Face == "" {
		return nil
	}
	msg := planpkg.UnexposedEnv(cond, c.rt.ExposeEnv)
	if msg == "" {
		return nil
	}
	return planspec.StateErrors{{Key: "plan.steps." + id + "." + kind, Msg: msg}}
}

// lazyConditions are st's conditions compiled as they are evaluated, for a report
// that evaluates a few of them: a compile error shows once its condition is asked
// for, in Err. Only the `on` globs are checked at once.
func (r *Runtime) lazyConditions(st *planspec.State) (*Conditions, error) {
	lazy, err := planpkg.CompileLazily(st)
	if err != nil {
		return nil, r.inStateFile(err)
	}
	return &Conditions{lazy: lazy, rt: r, st: st}, nil
}

// inStateFile names the state file in err's StateErrors.
func (r *Runtime) inStateFile(err error) error {
	var errs planspec.StateErrors
	if errors.As(err, &errs) {
		for _, e := range errs {
			e.File = r.WS.State
		}
	}
	return err
}

// condition is step id's condition of the kind; nil when it has none.
func (c *Conditions) condition(id, kind string) (*planpkg.Condition, error) {
	if c.lazy == nil {
		switch kind {
		case planpkg.CondWhen:
			return c.compiled.When[id], nil
		case planpkg.CondSkip:
			return c.compiled.Skip[id], nil
		case planpkg.CondCheck:
			return c.compiled.Check[id], nil
		case planpkg.CondExit:
			return c.compiled.Exit[id], nil
		case planpkg.CondAbort:
			return c.compiled.Abort[id], nil
		}
		return nil, nil
	}
	cond, err := c.lazy.Get(id, kind)
	if err != nil {
		return nil, c.rt.inStateFile(err)
	}
	return cond, nil
}

// compileStep compiles step id's conditions, so that Err reports their errors.
func (c *Conditions) compileStep(id string) {
	for _, kind := range []string{planpkg.CondWhen, planpkg.CondSkip, planpkg.CondCheck, planpkg.CondExit, planpkg.CondAbort} {
		_, _ = c.condition(id, kind)
	}
}

// Err is every compile error met so far by conditions compiled lazily, naming the
// state file and the key; nil when there is none.
func (c *Conditions) Err() error {
	if c.lazy == nil {
		return nil
	}
	if err := c.lazy.Err(); err != nil {
		return c.rt.inStateFile(err)
	}
	return nil
}

func (c *Conditions) env(now time.Time, id string) *planpkg.Env {
	return planpkg.ItemEnv(&planpkg.Env{
		Root:       c.rt.stepRoot(c.st, id),
		Now:        now,
		TryStarted: tryStarted(c.st.StepRuns[id]),
		Runs:       c.st.StepRuns,
		Step:       id,
		Vars:       c.st.Settings.Vars,
		Params:     c.st.Settings.Params,
		Loop:       c.st.LoopAround(id),
		Totals:     c.st.Totals(),
		Getenv:     c.getenv,
	}, c.st.Steps[id])
}

// Foreach evaluates foreach step id's expression to its list, with what a
// condition sees as of now.
func (c *Conditions) Foreach(now time.Time, id string) ([]any, error) {
	sp := c.st.Steps[id]
	if sp == nil {
		return nil, fmt.Errorf("no step %s", id)
	}
	return planpkg.EvalForeach(sp.Foreach, c.env(now, id))
}

// getenv is env() for the run's conditions: for a run that arrived through a
// face, the names the operator exposed and nothing else.
func (c *Conditions) getenv(name string) string {
	if c.st.Settings.Face != "" && !slices.Contains(c.rt.ExposeEnv, name) {
		return ""
	}
	if c.rt.Getenv == nil {
		return os.Getenv(name)
	}
	return c.rt.Getenv(name)
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

// Render renders step id's templates: its title, instruction and
// agent arguments, with what its conditions see as of now.
func (c *Conditions) Render(now time.Time, id string) (*planspec.StepSpec, error) {
	return planpkg.RenderSpec(c.st.Steps[id], c.st.Settings.Agent, c.env(now, id))
}

// Summary evaluates the plan's summary expressions with what a
// condition sees as of now.
func (c *Conditions) Summary(now time.Time, summary map[string]string) map[string]any {
	return planpkg.EvalSummary(summary, c.env(now, ""))
}

// Cond evaluates step id's "when" (true when unset), or its "skip", "exit" or
// "abort" (false when unset), as of now.
func (c *Conditions) Cond(now time.Time, id, kind string) (bool, error) {
	if c == nil {
		return kind == "when", nil
	}
	switch kind {
	case planpkg.CondWhen, planpkg.CondSkip, planpkg.CondExit, planpkg.CondAbort:
	default:
		return false, nil
	}
	cond, err := c.condition(id, kind)
	if err != nil {
		return false, err
	}
	if cond == nil {
		return kind == planpkg.CondWhen, nil
	}
	return cond.Eval(c.env(now, id))
}

// Check returns step id's check as of now as a function for Judge, or nil when
// it has none.
func (c *Conditions) Check(now time.Time, id string) func() (bool, error) {
	if c == nil {
		return nil
	}
	cond, err := c.condition(id, planpkg.CondCheck)
	if err != nil {
		return func() (bool, error) { return false, err }
	}
	if cond == nil {
		return nil
	}
	return func() (bool, error) { return cond.Eval(c.env(now, id)) }
}

// Reads are the literal paths and globs step id's when and skip name, and
// whether they are all those conditions may read.
func (c *Conditions) Reads(id string) (paths, globs []string, known bool) {
	if c == nil {
		return nil, nil, true
	}
	for _, kind := range []string{planpkg.CondWhen, planpkg.CondSkip} {
		cond, err := c.condition(id, kind)
		if err != nil {
			return nil, nil, false
		}
		if cond == nil {
			continue
		}
		p, g := cond.Paths()
		paths, globs = append(paths, p...), append(globs, g...)
		if !cond.PathsKnown() {
			return nil, nil, false
		}
	}
	return paths, globs, true
}

// Compiled exposes the compiled conditions, for deriving what to watch; nil for
// conditions compiled lazily.
func (c *Conditions) Compiled() *planpkg.Compiled { return c.compiled }
