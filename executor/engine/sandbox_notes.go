package engine

import (
	"fmt"
	"strings"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/planspec"
)

// SandboxView is what status, the page and validate say of a plan's sandboxes:
// which steps run sandboxed, which run a preset that edits files unattended
// without one, and what a sandbox will keep from working.
type SandboxView struct {
	// Sandboxed are the sandboxed steps, each with what its sandbox adds:
	// "fix (no network, write: out)".
	Sandboxed []string `json:"sandboxed,omitempty"`
	// Unsandboxed are the steps whose preset edits unattended with no sandbox:
	// "fix: claude".
	Unsandboxed []string `json:"unsandboxed,omitempty"`
	// Warnings are what a sandbox keeps from working, one a step.
	Warnings []string `json:"warnings,omitempty"`
}

// Empty reports whether the view has nothing to say.
func (v SandboxView) Empty() bool {
	return len(v.Sandboxed) == 0 && len(v.Unsandboxed) == 0 && len(v.Warnings) == 0
}

// Lines is the view in words, a line each: what status, the page and validate
// print.
func (v *SandboxView) Lines() []string {
	if v == nil {
		return nil
	}
	var out []string
	if len(v.Sandboxed) > 0 {
		out = append(out, "sandboxed: "+strings.Join(v.Sandboxed, "; "))
	}
	if len(v.Unsandboxed) > 0 {
		out = append(out, "unattended edits without a sandbox: "+strings.Join(v.Unsandboxed, "; ")+" (sandbox: true, or --sandbox)")
	}
	for _, w := range v.Warnings {
		out = append(out, "warning: sandbox: "+w)
	}
	return out
}

// SandboxNotes is the plan's SandboxView under pol (--sandbox,
// --require-sandbox).
func SandboxNotes(st *planspec.State, pol core.SandboxPolicy, getenv func(string) string) SandboxView {
	var v SandboxView
	for _, id := range st.StepQueue {
		sb := core.SandboxOf(st, id, pol)
		if sb == nil {
			if p := uneditedPresets(st, id, getenv); p != "" {
				v.Unsandboxed = append(v.Unsandboxed, id+": "+p)
			}
			continue
		}
		v.Sandboxed = append(v.Sandboxed, id+strings.TrimPrefix(sb.String(), "sandboxed"))
		v.Warnings = append(v.Warnings, sandboxWarnings(st, id)...)
	}
	return v
}

// uneditedPresets names step id's agents that edit files unattended: the
// presets among its agent and fallbacks.
func uneditedPresets(st *planspec.State, id string, getenv func(string) string) string {
	specs, _, err := proc.Candidates(st, id, getenv)
	if err != nil {
		return ""
	}
	var names []string
	for _, s := range specs {
		if proc.UnattendedEdit(s.Preset) {
			names = append(names, s.Preset)
		}
	}
	return strings.Join(names, ", ")
}

// sandboxWarnings are what step id's sandbox keeps from working.
func sandboxWarnings(st *planspec.State, id string) []string {
	sp := st.Steps[id]
	if sp == nil {
		return nil
	}
	var out []string
	if sp.AwaitOutputs > 0 {
		out = append(out, fmt.Sprintf("%s: awaitOutputs waits for a background job, which the sandbox ends with the agent", id))
	}
	for _, o := range sp.RequiredOutputs {
		if !strings.Contains(strings.Trim(o, "/"), "/") {
			out = append(out, fmt.Sprintf("%s: required output %s lies at the workspace's top, where a sandboxed agent cannot make it: put it in a folder (out/%s)", id, o, o))
		}
	}
	return out
}

// getenv is the runtime's Getenv; one that finds nothing when it has none.
func (r *Runtime) getenv() func(string) string {
	if r.Getenv != nil {
		return r.Getenv
	}
	return func(string) string { return "" }
}
