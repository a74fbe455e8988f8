package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/planspec"
	planpkg "github.com/stepseq/stepseq/planspec/plan"
)

// ErrNotAllowed is matched by the refusal of an agent that the plan's source
// may not name: faces answer it with the code not_allowed.
var ErrNotAllowed = errors.New("executor: agent not allowed")

// NotAllowedError names the agent refused, where the plan names it, and why. It
// is a configuration error too (errors.Is ErrConfig).
type NotAllowedError struct{ Msg string }

func (e *NotAllowedError) Error() string   { return e.Msg }
func (e *NotAllowedError) Unwrap() []error { return []error{ErrNotAllowed, core.ErrConfig} }

// AllowList is --allow-agent: when given, the only agents that run, whatever
// the plan's source. An entry is mcp, a preset's name, or a command: its
// program (found on PATH, links followed) and the leading arguments a plan's
// argv must start with. A pulled step (agent: mcp) launches nothing, and is
// always allowed; so `--allow-agent mcp` launches nothing at all.
type AllowList struct {
	entries []allowEntry
}

type allowEntry struct {
	words []string
	real  string // what words[0] runs; "" for a preset, or a program not found
}

// ParseAllowList reads --allow-agent values; nil when none is given. dir
// resolves a relative program path, as for the plan's agents.
func ParseAllowList(values []string, dir string) (*AllowList, error) {
	if len(values) == 0 {
		return nil, nil
	}
	l := &AllowList{}
	for _, v := range values {
		words := strings.Fields(v)
		if len(words) == 0 {
			return nil, &core.ConfigError{Msg: "--allow-agent: empty value: want mcp, a preset name or the agent's program, like --allow-agent /usr/local/bin/openclaw"}
		}
		e := allowEntry{words: words}
		switch {
		case len(words) == 1 && words[0] == planspec.AgentMCP:
		case len(words) == 1 && slices.Contains(planspec.AgentPresets, words[0]):
		default:
			if err := planspec.CheckAgentArgv(words, func(w string) string { return proc.ResolveProgram(w, dir) }); err != nil {
				return nil, &core.ConfigError{Msg: fmt.Sprintf("--allow-agent %q: %v", v, err)}
			}
			e.real = proc.ResolveProgram(words[0], dir)
		}
		l.entries = append(l.entries, e)
	}
	return l, nil
}

// Describe lists the entries, for messages and the log.
func (l *AllowList) Describe() string {
	if l == nil {
		return "any agent"
	}
	out := make([]string, len(l.entries))
	for i, e := range l.entries {
		out[i] = strings.Join(e.words, " ")
	}
	return strings.Join(out, ", ")
}

// permits reports whether the list allows the agent spec, its program resolved
// from dir.
func (l *AllowList) permits(s planspec.AgentSpec, dir string) bool {
	if planspec.IsPull(s) {
		return true
	}
	if l == nil {
		return true
	}
	if s.Preset != "" {
		return slices.ContainsFunc(l.entries, func(e allowEntry) bool { return len(e.words) == 1 && e.words[0] == s.Preset })
	}
	if len(s.Argv) == 0 {
		return false
	}
	real := proc.ResolveProgram(s.Argv[0], dir)
	for _, e := range l.entries {
		if e.real == "" && len(e.words) == 1 && (e.words[0] == planspec.AgentMCP || slices.Contains(planspec.AgentPresets, e.words[0])) {
			continue
		}
		same := s.Argv[0] == e.words[0] || real != "" && real == e.real
		if same && len(s.Argv) >= len(e.words) && slices.Equal(s.Argv[1:len(e.words)], e.words[1:]) {
			return true
		}
	}
	return false
}

// AgentSource is who handed a plan in: the workspace's owner (files, the stdio
// server) or a client of the HTTP listener.
type AgentSource int

const (
	// FromWorkspace: plans written into the workspace, and the stdio server.
	FromWorkspace AgentSource = iota
	// FromHTTP: plans that arrive over the HTTP listener (plan_submit, run_start).
	FromHTTP
)

// CheckPlanAgents applies the allow rule to every agent a plan may run: the one
// rule of what a shell would do (planspec.CheckAgentArgv, each program
// resolved from dir), and who may choose a program. A plan from HTTP may name
// agent: mcp, a preset (without arguments of its own), or an argv the allow
// list holds; with an allow list,
// every plan from any source is bounded by it, STEP_AGENT_CMD too where the
// plan names no agent. The error is a *ConfigError for the shell rule and a
// *NotAllowedError for the rest.
func CheckPlanAgents(p *planpkg.Plan, from AgentSource, allow *AllowList, getenv func(string) string, dir string) error {
	st := p.State("", "")
	type key struct{ source, agent string }
	seen := map[key]bool{}
	for _, id := range st.StepQueue {
		specs, sources, err := proc.Candidates(st, id, getenv)
		if err != nil {
			continue // STEP_AGENT_CMD unset: nothing would run, and the launch says so
		}
		for i, s := range specs {
			k := key{sources[i], fmt.Sprint(s)}
			if seen[k] {
				continue
			}
			seen[k] = true
			if err := checkAgent(s, sources[i], from, allow, dir); err != nil {
				return err
			}
		}
	}
	// A notify: command runs a program too, with each report on its stdin.
	for i, sink := range p.Notify {
		if len(sink.Command) == 0 || from == FromWorkspace && allow == nil {
			continue
		}
		if allow == nil || !allow.PermitsCommand(sink.Command, dir) {
			why := "a plan that arrives over HTTP may notify webhooks only, or commands that --allow-agent lists"
			if allow != nil {
				why = "this stepseq runs only the programs --allow-agent names (" + allow.Describe() + ")"
			}
			return &NotAllowedError{Msg: fmt.Sprintf("stepseq.notify[%d].command: [%s] is not allowed: %s", i, strings.Join(sink.Command, ", "), why)}
		}
	}
	return nil
}

// PermitsCommand reports whether the list allows a command (a plan's notify:
// command) to run; a nil list allows every one.
func (l *AllowList) PermitsCommand(argv []string, dir string) bool {
	if l == nil {
		return true
	}
	return len(argv) > 0 && !planspec.IsPull(planspec.AgentSpec{Argv: argv}) && l.permits(planspec.AgentSpec{Argv: argv}, dir)
}

func checkAgent(s planspec.AgentSpec, source string, from AgentSource, allow *AllowList, dir string) error {
	if s.Preset == "" && !planspec.IsPull(s) {
		if err := planspec.CheckAgentArgv(s.Argv, func(w string) string { return proc.ResolveProgram(w, dir) }); err != nil {
			return &core.ConfigError{Msg: source + ": " + err.Error()}
		}
	}
	switch {
	case allow != nil:
		if !allow.permits(s, dir) {
			return &NotAllowedError{Msg: fmt.Sprintf("%s: agent %s is not allowed: this stepseq runs only the agents --allow-agent names (%s)", source, describeSpec(s), allow.Describe())}
		}
	case from == FromHTTP && source != "STEP_AGENT_CMD" && s.Preset == "" && !planspec.IsPull(s):
		return &NotAllowedError{Msg: fmt.Sprintf("%s: agent %s is not allowed: a plan that arrives over HTTP may name only agent: mcp, a preset (%s), or a command that --allow-agent lists",
			source, describeSpec(s), strings.Join(planspec.AgentPresets, ", "))}
	case from == FromHTTP && s.Preset != "" && len(s.Args) > 0:
		// A preset's arguments can change what its CLI runs (a settings file
		// with hooks, a config override): over HTTP, only the preset's own.
		return &NotAllowedError{Msg: fmt.Sprintf("%s: agent %s is not allowed: a plan that arrives over HTTP may name a preset without arguments (they can change what its CLI runs), unless --allow-agent lists the preset",
			source, describeSpec(s))}
	}
	return nil
}

// describeSpec is an agent spec as a plan would write it.
func describeSpec(s planspec.AgentSpec) string {
	if s.Preset != "" && len(s.Args) > 0 {
		return fmt.Sprintf("{preset: %s, args: [%s]}", s.Preset, strings.Join(s.Args, ", "))
	}
	if s.Preset != "" {
		return s.Preset
	}
	return "[" + strings.Join(s.Argv, ", ") + "]"
}

// PermitAgents refuses, at launch, a candidate the allow list does not hold:
// the bound holds for a state written by hand, and for STEP_AGENT_CMD.
func (l *AllowList) PermitAgents(agents []proc.Agent, dir string) error {
	if l == nil {
		return nil
	}
	for _, a := range agents {
		s := planspec.AgentSpec{Preset: a.Preset}
		if a.Preset == "" {
			s.Argv = a.Argv
		}
		if !l.permits(s, dir) {
			return &NotAllowedError{Msg: fmt.Sprintf("%s: agent %s is not allowed: this stepseq runs only the agents --allow-agent names (%s)", a.Source, describeSpec(s), l.Describe())}
		}
	}
	return nil
}

// resolveAgents is ResolveAgents in this runtime's environment and workspace,
// bounded by its allow list.
func (r *Runtime) resolveAgents(st *planspec.State, id string) ([]proc.Agent, error) {
	agents, err := proc.ResolveAgents(st, id, r.Getenv, r.WS.Dir)
	if err != nil {
		return nil, err
	}
	if err := r.Allow.PermitAgents(agents, r.WS.Dir); err != nil {
		return nil, err
	}
	return agents, nil
}

// resolveAgent is the first candidate of resolveAgents that can run.
func (r *Runtime) resolveAgent(st *planspec.State, id string) (proc.Agent, error) {
	agents, err := r.resolveAgents(st, id)
	if err != nil {
		return proc.Agent{}, err
	}
	return agents[proc.NextAgent(agents, -1)], nil
}

// AdmitPlan judges the agents of a plan file read (CheckPlanAgents, in this
// runtime's environment and workspace) and, for a plan that arrived through a
// face, the names of the environment its conditions read (ExposeEnv): a
// refused plan is invalid, with the reason as its error, and is never applied.
func (r *Runtime) AdmitPlan(pf core.PlanFile, from AgentSource) core.PlanFile {
	if pf.Plan == nil {
		return pf
	}
	if err := CheckPlanAgents(pf.Plan, from, r.Allow, r.Getenv, r.WS.Dir); err != nil {
		pf.Plan, pf.Err = nil, fmt.Errorf("%s: %w", pf.Source, err)
		return pf
	}
	if pf.Face != "" {
		if err := pf.Plan.CheckEnv(r.ExposeEnv); err != nil {
			pf.Plan, pf.Err = nil, err
			return pf
		}
	}
	// A run starts on checked params: a plan dropped in plans/ on its defaults,
	// so one with a required param is refused with that reason.
	params, err := pf.Plan.ResolveParams(pf.Params)
	if err != nil {
		pf.Plan, pf.Err = nil, fmt.Errorf("%s: %w", pf.Source, err)
		return pf
	}
	pf.Resolved = params
	return pf
}
