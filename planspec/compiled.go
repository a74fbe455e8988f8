package planspec

import (
	"fmt"
	"maps"
	"slices"
)

// Compiled holds the compiled conditions of a state's steps, by step id. A step
// without a condition has no entry.
type Compiled struct {
	When, Skip, Check map[string]*Condition
}

// Compile compiles every step's when, skip and check, whether the state came from
// a plan or was written by hand, and checks that the `on` globs stay inside the
// workspace. Errors are StateErrors naming the key, like
// "plan.steps.build.when: …". Each condition is parsed and type-checked here; its
// bytecode is generated when it is first evaluated, so that a pass over a
// 10,000-step state pays only for the conditions it reaches.
func (s *State) Compile() (*Compiled, error) {
	c := &Compiled{When: map[string]*Condition{}, Skip: map[string]*Condition{}, Check: map[string]*Condition{}}
	var errs StateErrors
	fail := func(key, format string, args ...any) {
		errs = append(errs, &StateError{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	known := slices.Sorted(maps.Keys(s.Steps))
	for _, id := range s.stepOrder() {
		sp := s.Steps[id]
		prefix := "plan.steps." + id + "."
		for _, cond := range []struct {
			key, src string
			into     map[string]*Condition
		}{{"when", sp.When, c.When}, {"skip", sp.Skip, c.Skip}, {"check", sp.Check, c.Check}} {
			if cond.src == "" {
				continue
			}
			cc, err := checkCondition(cond.src)
			if err != nil {
				fail(prefix+cond.key, "%v", err)
				continue
			}
			for _, ref := range cc.steps {
				if s.Steps[ref] == nil {
					msg := fmt.Sprintf("no step %q in plan.steps", ref)
					if hint := suggest(ref, known); hint != "" {
						msg += fmt.Sprintf(": did you mean %q?", hint)
					}
					fail(prefix+cond.key, "%s", msg)
				}
			}
			cond.into[id] = cc
		}
		// requiredOutputs are not judged here: in a state file, as in the original, a
		// path leading outside the workspace is simply never present.
		for i, p := range sp.On {
			if err := checkGlob(p); err != nil {
				fail(fmt.Sprintf("%son[%d]", prefix, i), "%v", err)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return c, nil
}
