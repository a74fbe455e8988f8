package plan

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/stepseq/stepseq/planspec"
)

// Compiled holds the compiled conditions of a state's steps, by step id. A step
// without a condition has no entry.
type Compiled struct {
	When, Skip, Check map[string]*Condition
	// Exit and Abort are checked once the step is verified.
	Exit, Abort map[string]*Condition
}

// Condition kinds, as the keys of a step spec name them.
const (
	CondWhen  = "when"
	CondSkip  = "skip"
	CondCheck = "check"
	CondExit  = "exit"
	CondAbort = "abort"
)

// conditionKinds are a step's condition kinds in the order errors are reported.
var conditionKinds = [...]string{CondWhen, CondSkip, CondCheck, CondExit, CondAbort}

// conditionSource is the source of sp's condition of the kind; "" when unset.
func conditionSource(sp *planspec.StepSpec, kind string) string {
	switch kind {
	case CondWhen:
		return sp.When
	case CondSkip:
		return sp.Skip
	case CondCheck:
		return sp.Check
	case CondExit:
		return sp.Exit
	case CondAbort:
		return sp.Abort
	}
	return ""
}

// Compile compiles every step's when, skip and check, whether the state came from
// a plan or was written by hand, and checks that the `on` globs stay inside the
// workspace. Errors are StateErrors naming the key, like
// "plan.steps.build.when: …". Each condition is parsed and type-checked here; its
// bytecode is generated when it is first evaluated, so that a pass over a
// 10,000-step state pays only for the conditions it reaches.
func Compile(s *planspec.State) (*Compiled, error) {
	c := &Compiled{When: map[string]*Condition{}, Skip: map[string]*Condition{}, Check: map[string]*Condition{},
		Exit: map[string]*Condition{}, Abort: map[string]*Condition{}}
	into := map[string]map[string]*Condition{CondWhen: c.When, CondSkip: c.Skip, CondCheck: c.Check,
		CondExit: c.Exit, CondAbort: c.Abort}
	var errs planspec.StateErrors
	known := knownSteps(s)
	for _, id := range s.StepOrder() {
		sp := s.Steps[id]
		for _, kind := range conditionKinds {
			src := conditionSource(sp, kind)
			if src == "" {
				continue
			}
			cc, cerrs := compileCondition(s, id, kind, src, known)
			errs = append(errs, cerrs...)
			if cc != nil {
				into[kind][id] = cc
			}
		}
		errs = append(errs, checkOn(id, sp)...)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return c, nil
}

// knownSteps lists the state's step ids, sorted, for "did you mean" hints; it is
// built on first use, as only a condition naming a missing step needs it.
func knownSteps(s *planspec.State) func() []string {
	return sync.OnceValue(func() []string { return slices.Sorted(maps.Keys(s.Steps)) })
}

// compileCondition checks step id's condition of the kind, src, and that the steps
// it names exist. The condition is returned even when it names a missing step.
func compileCondition(s *planspec.State, id, kind, src string, known func() []string) (*Condition, planspec.StateErrors) {
	key := "plan.steps." + id + "." + kind
	cc, err := checkCondition(src)
	if err != nil {
		return nil, planspec.StateErrors{{Key: key, Msg: err.Error()}}
	}
	var errs planspec.StateErrors
	for _, name := range cc.vars {
		if msg := undeclaredVar(name, s.Settings.Vars); msg != "" {
			errs = append(errs, &planspec.StateError{Key: key, Msg: msg})
		}
	}
	for _, ref := range cc.steps {
		if s.Steps[ref] == nil {
			msg := fmt.Sprintf("no step %q in plan.steps", ref)
			if hint := planspec.Suggest(ref, known()); hint != "" {
				msg += fmt.Sprintf(": did you mean %q?", hint)
			}
			errs = append(errs, &planspec.StateError{Key: key, Msg: msg})
		}
	}
	return cc, errs
}

// checkOn checks that step id's `on` globs stay inside the workspace.
// requiredOutputs are not judged: in a state file, as in the original, a path
// leading outside the workspace is simply never present.
func checkOn(id string, sp *planspec.StepSpec) planspec.StateErrors {
	var errs planspec.StateErrors
	for i, p := range sp.On {
		if err := planspec.CheckGlob(p); err != nil {
			errs = append(errs, &planspec.StateError{Key: fmt.Sprintf("plan.steps.%s.on[%d]", id, i), Msg: err.Error()})
		}
	}
	return errs
}

// LazyConditions are a state's conditions compiled on first use. A report on a
// 10,000-step state evaluates the conditions of the one step it stops at; checking
// all 13,000 would be most of its cost. Compile is for whoever must know that every
// condition is valid: a validation, or a pass that refuses to run an invalid state.
// A condition is read from its step's spec when first asked for. Safe for
// concurrent use.
type LazyConditions struct {
	s     *planspec.State
	known func() []string

	mu   sync.Mutex
	m    map[lazyKey]lazyCondition
	errs planspec.StateErrors // of the conditions compiled so far, in the order they were
}

type lazyKey struct{ id, kind string }

type lazyCondition struct {
	c    *Condition
	errs planspec.StateErrors
}

// CompileLazily checks the state's `on` globs, as Compile does, and returns its
// conditions to be compiled when asked for.
func CompileLazily(s *planspec.State) (*LazyConditions, error) {
	for id, sp := range s.Steps {
		if sp != nil && checkOn(id, sp) != nil {
			// Reported as Compile reports them, in step order.
			var errs planspec.StateErrors
			for _, id := range s.StepOrder() {
				errs = append(errs, checkOn(id, s.Steps[id])...)
			}
			return nil, errs
		}
	}
	return &LazyConditions{s: s, known: knownSteps(s), m: map[lazyKey]lazyCondition{}}, nil
}

// Get returns step id's condition of the kind (CondWhen, CondSkip, CondCheck, CondExit or CondAbort),
// compiled on the first call; nil when the step has none. Errors are those Compile
// reports for that key, as StateErrors.
func (l *LazyConditions) Get(id, kind string) (*Condition, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := lazyKey{id, kind}
	got, ok := l.m[k]
	if !ok {
		if sp := l.s.Steps[id]; sp != nil {
			if src := conditionSource(sp, kind); src != "" {
				got.c, got.errs = compileCondition(l.s, id, kind, src, l.known)
			}
		}
		l.m[k] = got
		l.errs = append(l.errs, got.errs...)
	}
	if len(got.errs) > 0 {
		return nil, got.errs
	}
	return got.c, nil
}

// Err is the errors of the conditions compiled so far, as StateErrors; nil when
// there is none.
func (l *LazyConditions) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) == 0 {
		return nil
	}
	return slices.Clone(l.errs)
}
