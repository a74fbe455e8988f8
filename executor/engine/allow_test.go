package engine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/planspec"
	planpkg "github.com/stepseq/stepseq/planspec/plan"
)

const ruleFix = "stepseq never runs the prompt through a shell or as code"

// shellLink makes dir/name a symbolic link to the system's sh.
func shellLink(t *testing.T, dir, name string) string {
	t.Helper()
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, name)
	if err := os.Symlink(sh, link); err != nil {
		t.Fatal(err)
	}
	return link
}

// TestResolveAgents_ShellRule: STEP_AGENT_CMD and a plan's argv meet the one
// rule at launch, the program's path resolved: a link named agent that points
// at sh is a shell, and so is sh behind a wrapper.
func TestResolveAgents_ShellRule(t *testing.T) {
	dir := t.TempDir()
	shellLink(t, dir, "agent")
	abs := shellLink(t, t.TempDir(), "worker")
	for _, tc := range []struct{ cmd, want string }{
		{"env sh", `STEP_AGENT_CMD: "sh" is a shell; ` + ruleFix},
		{"nice bash", `STEP_AGENT_CMD: "bash" is a shell; ` + ruleFix},
		{"timeout 5 sh", `STEP_AGENT_CMD: "sh" is a shell; ` + ruleFix},
		{"python3 -c exec", `STEP_AGENT_CMD: "python3" -c runs its argument as code; ` + ruleFix},
		{"./agent --run", `STEP_AGENT_CMD: "./agent" is a shell (it runs `},
		{"nohup " + abs, `STEP_AGENT_CMD: "` + abs + `" is a shell (it runs `},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			_, err := proc.ResolveAgents(presetState(planspec.AgentSpec{}), "s", agentEnv(tc.cmd), dir)
			if err == nil || !errors.Is(err, core.ErrConfig) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a configuration error starting %q", err, tc.want)
			}
		})
	}
	t.Run("a plan's argv", func(t *testing.T) {
		st := presetState(planspec.AgentSpec{Argv: []string{"./agent"}})
		_, err := proc.ResolveAgents(st, "s", agentEnv(""), dir)
		if err == nil || !strings.HasPrefix(err.Error(), `stepseq.agent: "./agent" is a shell (it runs `) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("a real agent", func(t *testing.T) {
		if _, err := proc.ResolveAgents(presetState(planspec.AgentSpec{}), "s", agentEnv("env FOO=1 true"), dir); err != nil {
			t.Fatal(err)
		}
	})
}

func mustPlan(t *testing.T, src string) *planpkg.Plan {
	t.Helper()
	p, err := planpkg.ParsePlan(strings.NewReader(src), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCheckPlanAgents: who may choose a program. Over HTTP a plan names mcp, a
// preset or a listed command; with --allow-agent every plan is bounded, and
// `--allow-agent mcp` lets nothing launch.
func TestCheckPlanAgents(t *testing.T) {
	dir := t.TempDir()
	bin := t.TempDir()
	agent := filepath.Join(bin, "myagent")
	if err := os.WriteFile(agent, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(agent, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	step := func(agent string) string {
		return "steps:\n  - id: a\n    title: A\n    instruction: do a\n" + agent
	}
	list := func(vals ...string) *AllowList {
		l, err := ParseAllowList(vals, dir)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	env := agentEnv("openclaw agent --message")
	for _, tc := range []struct {
		name  string
		plan  string
		from  AgentSource
		allow *AllowList
		want  string // "" admitted; else the refusal's start
	}{
		{"http: a program", step("    agent: [/usr/bin/python3, /tmp/x.py]\n"), FromHTTP, nil,
			"plan.steps.a.agent: agent [/usr/bin/python3, /tmp/x.py] is not allowed: a plan that arrives over HTTP may name only agent: mcp, a preset"},
		{"http: mcp", step("    agent: mcp\n"), FromHTTP, nil, ""},
		{"http: a preset", step("    agent: claude\n"), FromHTTP, nil, ""},
		{"http: a preset's arguments", step("    agent: {preset: claude, args: [--settings, hooks.json]}\n"), FromHTTP, nil,
			"plan.steps.a.agent: agent {preset: claude, args: [--settings, hooks.json]} is not allowed: a plan that arrives over HTTP may name a preset without arguments"},
		{"http: a listed preset's arguments", step("    agent: {preset: claude, args: [--model, x]}\n"), FromHTTP, list("claude"), ""},
		{"workspace: a preset's arguments", step("    agent: {preset: claude, args: [--model, x]}\n"), FromWorkspace, nil, ""},
		{"http: STEP_AGENT_CMD is the operator's", step(""), FromHTTP, nil, ""},
		{"http: a listed program", step("    agent: [" + agent + ", --fast]\n"), FromHTTP, list(agent), ""},
		{"http: listed through a link", step("    agent: [./link]\n"), FromHTTP, list(agent), ""},
		{"http: a listed command's leading arguments", step("    agent: [" + agent + ", run]\n"), FromHTTP, list(agent + " exec"),
			"plan.steps.a.agent: agent [" + agent + ", run] is not allowed: this stepseq runs only the agents --allow-agent names (" + agent + " exec)"},
		{"http: a shell is the shell rule's", step("    agent: [./link2]\n"), FromHTTP, nil, ""},
		{"workspace: a program", step("    agent: [" + agent + "]\n"), FromWorkspace, nil, ""},
		{"bounded: a preset not listed", step("    agent: claude\n"), FromWorkspace, list("mcp"),
			"plan.steps.a.agent: agent claude is not allowed: this stepseq runs only the agents --allow-agent names (mcp)"},
		{"bounded: STEP_AGENT_CMD not listed", step(""), FromWorkspace, list("mcp"),
			"STEP_AGENT_CMD: agent [openclaw, agent, --message] is not allowed"},
		{"bounded: a fallback not listed", "fallback: [codex]\n" + step("    agent: claude\n"), FromWorkspace, list("claude"),
			"stepseq.fallback[0]: agent codex is not allowed"},
		{"bounded: mcp", step("    agent: mcp\n"), FromHTTP, list("mcp"), ""},
		{"http: a notify command", "notify: [{command: [" + agent + "]}]\n" + step("    agent: mcp\n"), FromHTTP, nil,
			"stepseq.notify[0].command: [" + agent + "] is not allowed: a plan that arrives over HTTP may notify webhooks only"},
		{"http: a notify webhook", "notify: [{webhook: 'https://ntfy.sh/x'}]\n" + step("    agent: mcp\n"), FromHTTP, nil, ""},
		{"http: a listed notify command", "notify: [{command: [./link]}]\n" + step("    agent: mcp\n"), FromHTTP, list(agent), ""},
		{"bounded: a notify command not listed", "notify: [{command: [" + agent + "]}]\n" + step("    agent: mcp\n"), FromWorkspace, list("mcp"),
			"stepseq.notify[0].command: [" + agent + "] is not allowed: this stepseq runs only the programs --allow-agent names (mcp)"},
		{"workspace: a notify command", "notify: [{command: [" + agent + "]}]\n" + step("    agent: mcp\n"), FromWorkspace, nil, ""},
		{"bounded: a listed preset", step("    agent: claude\n"), FromWorkspace, list("claude"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := tc.plan
			if strings.Contains(plan, "./link2") {
				shellLink(t, dir, "link2")
			}
			err := CheckPlanAgents(mustPlan(t, plan), tc.from, tc.allow, env, dir)
			switch {
			case strings.Contains(plan, "./link2"):
				if err == nil || !errors.Is(err, core.ErrConfig) || errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), "is a shell (it runs ") {
					t.Fatalf("err = %v, want the shell rule's", err)
				}
			case tc.want == "":
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
			default:
				if err == nil || !errors.Is(err, ErrNotAllowed) || !strings.HasPrefix(err.Error(), tc.want) {
					t.Fatalf("err = %v, want not allowed: %s", err, tc.want)
				}
			}
		})
	}
}

// TestParseAllowList: an entry is mcp, a preset or a program that is no shell.
func TestParseAllowList(t *testing.T) {
	if l, err := ParseAllowList(nil, "."); l != nil || err != nil {
		t.Fatalf("no values = %v, %v; want no bound", l, err)
	}
	for _, v := range []string{"bash", "env sh", "python3 -c"} {
		if _, err := ParseAllowList([]string{v}, "."); err == nil || !strings.Contains(err.Error(), ruleFix) {
			t.Errorf("--allow-agent %q: err = %v, want the shell rule's", v, err)
		}
	}
	if _, err := ParseAllowList([]string{" "}, "."); err == nil {
		t.Error("an empty value passed")
	}
}

// TestResolveAgents_AllowList: with --allow-agent mcp, launching refuses even
// STEP_AGENT_CMD and a state written by hand.
func TestResolveAgents_AllowList(t *testing.T) {
	dir := t.TempDir()
	rt, err := NewRuntime(filepath.Join(dir, "state.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	rt.Getenv = agentEnv("true")
	if rt.Allow, err = ParseAllowList([]string{"mcp"}, dir); err != nil {
		t.Fatal(err)
	}
	_, err = rt.resolveAgents(presetState(planspec.AgentSpec{}), "s")
	if !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), "STEP_AGENT_CMD: agent [") {
		t.Fatalf("err = %v, want STEP_AGENT_CMD not allowed", err)
	}
	if rt.Allow, err = ParseAllowList([]string{"true"}, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.resolveAgents(presetState(planspec.AgentSpec{}), "s"); err != nil {
		t.Fatalf("a listed STEP_AGENT_CMD refused: %v", err)
	}
}
