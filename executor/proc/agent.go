package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/planspec"
)

// PromptPlaceholder in an agent argv is replaced by the prompt.
const PromptPlaceholder = "{prompt}"

// ChangedPlaceholder in an agent argv is replaced by the changed paths, one
// argument each (none when nothing changed).
const ChangedPlaceholder = "{changed}"

// Agent is the command that runs a step: an argv prefix and where it came from.
type Agent struct {
	Argv   []string
	Source string // "STEP_AGENT_CMD", "stepseq.agent", "plan.steps.<id>.agent", "stepseq.fallback[1]", …
	Preset string // the preset it was made from; empty for a command given as a list
	// Unavailable says why this candidate cannot run (its program is not on PATH);
	// the launch path passes over it to the next candidate, and journals why.
	Unavailable string

	args []string // the preset's extra arguments, for its resume form
}

// Name is what messages and the journal call the agent: its preset, or its program.
func (a Agent) Name() string {
	if a.Preset != "" {
		return a.Preset
	}
	if len(a.Argv) == 0 {
		return ""
	}
	return filepath.Base(a.Argv[0])
}

// ResolveAgents lists the step's candidate agents in the order they are tried: its
// agent (the step's own, else the plan's, else STEP_AGENT_CMD split on white
// space), then its fallbacks (the step's, else the plan's). A candidate whose
// program is not on PATH stays in the list with Unavailable set. It refuses
// shells and unknown presets, and it is a configuration error when no candidate
// can run. dir resolves a relative program path such as ./agent.
func ResolveAgents(st *planspec.State, id string, getenv func(string) string, dir string) ([]Agent, error) {
	specs, sources, err := Candidates(st, id, getenv)
	if err != nil {
		return nil, err
	}
	agents := make([]Agent, 0, len(specs))
	for i, s := range specs {
		a, err := resolveOne(s, sources[i], dir)
		if err != nil {
			return nil, err
		}
		agents = append(agents, a)
	}
	if NextAgent(agents, -1) < 0 {
		msg := agents[0].Unavailable
		if len(agents) > 1 {
			msg += fmt.Sprintf(", nor is any fallback (%s)", strings.Join(names(agents[1:]), ", "))
		}
		return nil, &core.ConfigError{Msg: msg}
	}
	return agents, nil
}

// Candidates are the agent specs a step would try, in order, and where each
// comes from: its agent (the step's own, else the plan's, else STEP_AGENT_CMD),
// then its fallbacks (the step's, else the plan's), repeats left out.
func Candidates(st *planspec.State, id string, getenv func(string) string) ([]planspec.AgentSpec, []string, error) {
	spec := st.Steps[id]
	var primary planspec.AgentSpec
	source := "STEP_AGENT_CMD"
	switch {
	case spec != nil && !spec.Agent.IsZero():
		primary, source = spec.Agent, "plan.steps."+id+".agent"
	case !st.Settings.Agent.IsZero():
		primary, source = st.Settings.Agent, "stepseq.agent"
	default:
		primary.Argv = strings.Fields(getenv("STEP_AGENT_CMD"))
		if len(primary.Argv) == 0 {
			return nil, nil, &core.ConfigError{Msg: "STEP_AGENT_CMD is not set: set it to your agent's command, for example STEP_AGENT_CMD='openclaw agent --message' (the prompt is appended as the last argument), or name a preset in the plan: agent: claude"}
		}
	}
	fallback, fsource := st.Settings.Fallback, "stepseq.fallback"
	if spec != nil && spec.Fallback != nil {
		fallback, fsource = spec.Fallback, "plan.steps."+id+".fallback"
	}
	specs := []planspec.AgentSpec{primary}
	sources := []string{source}
	for i, name := range fallback {
		f := planspec.AgentSpec{Preset: name}
		if slices.ContainsFunc(specs, f.Equal) {
			continue
		}
		specs = append(specs, f)
		sources = append(sources, fmt.Sprintf("%s[%d]", fsource, i))
	}
	return specs, sources, nil
}

// ResolveAgent is the first candidate of ResolveAgents that can run.
func ResolveAgent(st *planspec.State, id string, getenv func(string) string, dir string) (Agent, error) {
	agents, err := ResolveAgents(st, id, getenv, dir)
	if err != nil {
		return Agent{}, err
	}
	return agents[NextAgent(agents, -1)], nil
}

// NextAgent is the index of the first candidate after index after that can run,
// or -1 when none is left.
func NextAgent(agents []Agent, after int) int {
	for i := after + 1; i < len(agents); i++ {
		if agents[i].Unavailable == "" {
			return i
		}
	}
	return -1
}

func names(agents []Agent) []string {
	out := make([]string, len(agents))
	for i, a := range agents {
		out[i] = a.Name()
	}
	return out
}

// resolveOne turns one agent spec into a command whose program is looked up on PATH.
func resolveOne(s planspec.AgentSpec, source, dir string) (Agent, error) {
	a := Agent{Argv: s.Argv, Source: source, Preset: s.Preset, args: s.Args}
	if s.Preset != "" {
		argv, err := ResolvePreset(s.Preset, s.Args)
		if err != nil {
			return a, &core.ConfigError{Msg: source + ": " + err.Error()}
		}
		a.Argv = argv
	}
	// A preset's program is no shell, and its -c or -e is its own (codex -c
	// key=value, gemini -e extension): only a command given as a list is checked.
	if s.Preset == "" {
		if err := checkArgv(a, dir); err != nil {
			return a, err
		}
	}
	prog := a.Argv[0]
	if strings.Contains(prog, "/") && !filepath.IsAbs(prog) {
		prog = filepath.Join(dir, prog)
	}
	path, err := exec.LookPath(prog)
	switch {
	case err != nil && prog != a.Argv[0]:
		// A relative path is the workspace's, wherever stepseq was started.
		a.Unavailable = fmt.Sprintf("%s: agent %q not found: a relative path is resolved against the workspace, and %s is not an executable file: give its full path, or one relative to %s",
			source, a.Argv[0], prog, dir)
		return a, nil
	case err != nil && isFile(filepath.Join(dir, prog)):
		// A bare name is looked up on PATH, never in the workspace.
		a.Unavailable = fmt.Sprintf("%s: agent %q not found on PATH, but %s is in the workspace: name it ./%s (a path is the workspace's)", source, prog, prog, prog)
		return a, nil
	case err != nil:
		a.Unavailable = fmt.Sprintf("%s: agent %q not found on PATH: install it or give its full path", source, a.Argv[0])
		return a, nil
	}
	a.Argv = append([]string{path}, a.Argv[1:]...)
	return a, nil
}

// checkArgv applies the one rule of what an agent may run (planspec.CheckAgentArgv)
// with what each program word resolves to on this machine: a link named agent
// that points at /bin/sh is a shell.
func checkArgv(a Agent, dir string) error {
	if err := planspec.CheckAgentArgv(a.Argv, func(w string) string { return ResolveProgram(w, dir) }); err != nil {
		var code *planspec.AgentCodeError
		if errors.As(err, &code) && a.Source == "STEP_AGENT_CMD" {
			code.Env = a.Source
		}
		return &core.ConfigError{Msg: a.Source + ": " + err.Error()}
	}
	return nil
}

// ResolveProgram is the file the program word runs, symbolic links followed,
// or "" when it cannot be found.
func ResolveProgram(word, dir string) string {
	if strings.Contains(word, "/") && !filepath.IsAbs(word) {
		word = filepath.Join(dir, word)
	}
	path, err := exec.LookPath(word)
	if err != nil {
		return ""
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return ""
	}
	return real
}

// Command is the argv for one try: {prompt} replaced by the prompt, or the prompt
// appended as one final argument; {changed} replaced by the changed paths (see
// ChangedPaths), one argument each. Never a shell.
func (a Agent) Command(prompt string, changed []string) []string {
	return expandArgv(a.Argv, prompt, changed)
}

// ResumeCommand is the argv of a retry that continues session id,
// laid out as Command lays out a fresh try's; nil when the agent is no preset
// that can resume, or id is empty: the retry is fresh.
func (a Agent) ResumeCommand(id, prompt string, changed []string) []string {
	p, ok := LookupPreset(a.Preset)
	if !ok || len(a.Argv) == 0 {
		return nil
	}
	argv := p.ResumeCommand(id, a.args)
	if argv == nil {
		return nil
	}
	argv[0] = a.Argv[0] // the program as found on PATH
	return expandArgv(argv, prompt, changed)
}

// Limited reads a finished try of this agent as its preset reads a usage limit
// (Preset.Limited); a command given as a list says nothing of limits.
func (a Agent) Limited(exit core.Exit) (core.Limit, bool) {
	if p, ok := LookupPreset(a.Preset); ok {
		return p.Limited(exit)
	}
	return core.Limit{}, false
}

// Session is the session id the agent's output names (Preset.Session).
func (a Agent) Session(exit core.Exit) string {
	if p, ok := LookupPreset(a.Preset); ok {
		return p.Session(exit)
	}
	return ""
}

func expandArgv(argv []string, prompt string, changed []string) []string {
	changed = ChangedPaths(changed)
	out := make([]string, 0, len(argv)+1)
	replaced := false
	for _, w := range argv {
		switch w {
		case PromptPlaceholder:
			out = append(out, prompt)
			replaced = true
		case ChangedPlaceholder:
			out = append(out, changed...)
		default:
			out = append(out, w)
		}
	}
	if !replaced {
		out = append(out, prompt)
	}
	return out
}

// Judge reads a finished try of this agent: see Preset.Judge. A command given as
// a list is judged only on whether it could start.
func (a Agent) Judge(exit core.Exit) (failed string, unavailable bool) {
	if p, ok := LookupPreset(a.Preset); ok {
		return p.Judge(exit)
	}
	failed, unavailable, _ = judgeStart(exit)
	return failed, unavailable
}

// Refused names the tool uses the agent CLI's own permissions refused during
// the try, "" when none were: claude lists them in its result's
// permission_denials while reporting success.
func (a Agent) Refused(exit core.Exit) string {
	if a.Preset != "claude" {
		return ""
	}
	return claudeRefused(exit, a.Argv)
}

// FallbackEntry is the journal record of a try passed from one candidate to the
// next: the same try, not a retry.
func FallbackEntry(step string, try int, from, to Agent, reason string) core.Entry {
	return core.Entry{Event: "fallback", Step: step, Try: try, Reason: reason,
		Detail: map[string]any{"from": from.Name(), "to": to.Name(), "source": to.Source}}
}

// MaxRetriesFromEnv reads STEP_MAX_RETRIES (default 3).
func MaxRetriesFromEnv(getenv func(string) string) (int, error) {
	v := strings.TrimSpace(getenv("STEP_MAX_RETRIES"))
	if v == "" {
		return 3, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, &core.ConfigError{Msg: fmt.Sprintf("STEP_MAX_RETRIES=%q: want a whole number ≥ 0, like 3", v)}
	}
	return n, nil
}

// isFile reports whether path is a regular file.
func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}
