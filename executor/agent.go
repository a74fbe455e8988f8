package executor

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/stepseq/stepseq/planspec"
)

// ErrConfig is matched by configuration errors: a missing or unsafe agent command, a
// bad STEP_MAX_RETRIES. Commands exit 2 on them, before touching the state.
var ErrConfig = errors.New("executor: configuration error")

// ConfigError is a configuration problem with the fix in its message.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return e.Msg }
func (e *ConfigError) Unwrap() error { return ErrConfig }

// shells are the interpreters the original refuses: the prompt must never reach one.
var shells = []string{"bash", "sh", "dash", "zsh", "ksh", "eval", "exec"}

// PromptPlaceholder in an agent argv is replaced by the prompt.
const PromptPlaceholder = "{prompt}"

// Agent is the command that runs a step: an argv prefix and where it came from.
type Agent struct {
	Argv   []string
	Source string // "STEP_AGENT_CMD", "stepseq.agent" or "plan.steps.<id>.agent"
}

// ResolveAgent picks the step's agent: the step's own, else the plan's, else
// STEP_AGENT_CMD split on white space. It refuses shells and binaries not on PATH.
// dir resolves a relative program path such as ./agent.
func ResolveAgent(st *planspec.State, id string, getenv func(string) string, dir string) (Agent, error) {
	a := Agent{Source: "STEP_AGENT_CMD"}
	switch spec := st.Steps[id]; {
	case spec != nil && len(spec.Agent) > 0:
		a = Agent{Argv: spec.Agent, Source: "plan.steps." + id + ".agent"}
	case len(st.Settings.Agent) > 0:
		a = Agent{Argv: st.Settings.Agent, Source: "stepseq.agent"}
	default:
		a.Argv = strings.Fields(getenv("STEP_AGENT_CMD"))
		if len(a.Argv) == 0 {
			return a, &ConfigError{Msg: "STEP_AGENT_CMD is not set: set it to your agent's command, for example STEP_AGENT_CMD='openclaw agent --message' (the prompt is appended as the last argument)"}
		}
	}
	if err := checkArgv(a); err != nil {
		return a, err
	}
	prog := a.Argv[0]
	if strings.Contains(prog, "/") && !filepath.IsAbs(prog) {
		prog = filepath.Join(dir, prog)
	}
	path, err := exec.LookPath(prog)
	if err != nil {
		return a, &ConfigError{Msg: fmt.Sprintf("%s: agent %q not found on PATH: install it or give its full path", a.Source, a.Argv[0])}
	}
	a.Argv = append([]string{path}, a.Argv[1:]...)
	return a, nil
}

func checkArgv(a Agent) error {
	base := strings.ToLower(filepath.Base(a.Argv[0]))
	if slices.Contains(shells, base) {
		return &ConfigError{Msg: fmt.Sprintf("%s: %q is a shell; stepseq never runs the prompt through a shell: name your agent's binary instead (e.g. openclaw agent --message)", a.Source, a.Argv[0])}
	}
	for _, w := range a.Argv[1:] {
		if w == "-c" || w == "-e" {
			return &ConfigError{Msg: fmt.Sprintf("%s: %q is a shell flag; stepseq never runs the prompt through a shell: name your agent's binary instead", a.Source, w)}
		}
	}
	return nil
}

// Command is the argv for one try: {prompt} replaced by the prompt, or the prompt
// appended as one final argument. Never a shell.
func (a Agent) Command(prompt string) []string {
	out := make([]string, 0, len(a.Argv)+1)
	replaced := false
	for _, w := range a.Argv {
		if w == PromptPlaceholder {
			w = prompt
			replaced = true
		}
		out = append(out, w)
	}
	if !replaced {
		out = append(out, prompt)
	}
	return out
}

// MaxRetriesFromEnv reads STEP_MAX_RETRIES (default 3).
func MaxRetriesFromEnv(getenv func(string) string) (int, error) {
	v := strings.TrimSpace(getenv("STEP_MAX_RETRIES"))
	if v == "" {
		return 3, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, &ConfigError{Msg: fmt.Sprintf("STEP_MAX_RETRIES=%q: want a whole number ≥ 0, like 3", v)}
	}
	return n, nil
}
