package core

import (
	"fmt"

	"github.com/stepseq/stepseq/planspec"
)

// SandboxPolicy is what stepseq itself was told of sandboxes, beyond the plan.
type SandboxPolicy struct {
	// All runs every step's agent sandboxed (--sandbox), with the step's or the
	// plan's settings when they give some.
	All bool
	// Require launches no agent that would run unsandboxed (--require-sandbox),
	// and no pulled step, whose worker runs outside stepseq's reach.
	Require bool
}

// SandboxOf is how step id's agent runs: its sandbox settings, or nil for an
// agent that runs bare. A pulled step runs in its worker: never sandboxed here.
func SandboxOf(st *planspec.State, id string, pol SandboxPolicy) *planspec.Sandbox {
	if st.IsPull(id) {
		return nil
	}
	sb := st.SandboxFor(id)
	switch {
	case sb != nil && sb.On:
		return sb
	case !pol.All:
		return nil
	case sb != nil && st.Settings.Sandbox != nil && st.Settings.Sandbox.On:
		return st.Settings.Sandbox // the step turned off what --sandbox turns on again
	}
	return planspec.SandboxOn
}

// SandboxRefusal says why step id may not launch under pol: it would run
// unsandboxed where a sandbox is required. It is a configuration error: no try is
// spent on it.
func SandboxRefusal(st *planspec.State, id string, pol SandboxPolicy) error {
	if !pol.Require || SandboxOf(st, id, pol) != nil {
		return nil
	}
	if st.IsPull(id) {
		return &ConfigError{Msg: fmt.Sprintf("sandbox required (--require-sandbox): step %s is pulled by an MCP worker, which runs outside stepseq's sandbox; give it an agent stepseq launches", id)}
	}
	return &ConfigError{Msg: fmt.Sprintf("sandbox required (--require-sandbox): step %s is not sandboxed; add sandbox: true to the plan or the step, or run with --sandbox", id)}
}
