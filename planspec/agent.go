package planspec

import (
	"fmt"
	"slices"
	"strings"
)

// AgentPresets are the names `agent:` and `fallback:` accept for the agent CLIs
// people use, in the order the docs list them. What each one runs, and how it
// fails, is the executor's business.
var AgentPresets = []string{"claude", "codex", "gemini", "aider", "opencode", "goose", "openclaw"}

// AgentSpec is how a plan names an agent: an argv prefix, or a preset with extra
// arguments. The zero value names none (STEP_AGENT_CMD applies).
type AgentSpec struct {
	Argv   []string // argv prefix; set when Preset is empty
	Preset string   // one of AgentPresets
	Args   []string // extra arguments after the preset's own; may place {prompt} or {changed}
}

// IsZero reports whether the spec names no agent.
func (a AgentSpec) IsZero() bool { return len(a.Argv) == 0 && a.Preset == "" }

// Clone returns a copy that shares no slice with a.
func (a AgentSpec) Clone() AgentSpec {
	return AgentSpec{Argv: slices.Clone(a.Argv), Preset: a.Preset, Args: slices.Clone(a.Args)}
}

// Equal reports whether a and b name the same agent.
func (a AgentSpec) Equal(b AgentSpec) bool {
	return a.Preset == b.Preset && slices.Equal(a.Argv, b.Argv) && slices.Equal(a.Args, b.Args)
}

// MarshalJSON writes the form a plan would: the argv list, the preset's name, or
// {"preset": NAME, "args": [...]} when there are extra arguments.
func (a AgentSpec) MarshalJSON() ([]byte, error) {
	switch {
	case a.Preset == "":
		return marshal(nonNil(a.Argv))
	case len(a.Args) == 0:
		return marshal(a.Preset)
	}
	return marshal(struct {
		Preset string   `json:"preset"`
		Args   []string `json:"args"`
	}{a.Preset, a.Args})
}

// CheckPreset returns nil for a known preset name, else an error that lists the
// presets and suggests the closest one.
func CheckPreset(name string) error {
	if slices.Contains(AgentPresets, name) || name == AgentMCP {
		return nil
	}
	if s := Suggest(name, AgentPresets); s != "" {
		return fmt.Errorf("unknown agent preset %q: did you mean %s?", Clip(name, 40), s)
	}
	msg := fmt.Sprintf("unknown agent preset %q: want one of %s", Clip(name, 40), strings.Join(AgentPresets, " "))
	if strings.ContainsAny(strings.TrimSpace(name), " \t") {
		msg += fmt.Sprintf(", or the command as a list, like [%s]", Clip(strings.Join(strings.Fields(name), ", "), 60))
	}
	return fmt.Errorf("%s", msg)
}

// HasTemplate reports whether an argument of the agent holds a ${EXPR}.
func (a AgentSpec) HasTemplate() bool {
	words := a.Args
	if a.Preset == "" {
		words = a.Argv
	}
	for _, w := range words {
		if HasTemplate(w) {
			return true
		}
	}
	return false
}

// HasTemplate reports whether s holds a ${EXPR} (or a $${) to render: text
// without one is sent as it is.
func HasTemplate(s string) bool { return strings.Contains(s, "${") }
