package planspec

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCheckPreset(t *testing.T) {
	for _, name := range AgentPresets {
		if err := CheckPreset(name); err != nil {
			t.Errorf("CheckPreset(%q) = %v", name, err)
		}
	}
	for _, tc := range []struct{ name, want string }{
		{"claud", `unknown agent preset "claud": did you mean claude?`},
		{"Codex", `unknown agent preset "Codex": did you mean codex?`},
		{"xyzzy", `unknown agent preset "xyzzy": want one of claude codex gemini aider opencode goose openclaw`},
		{"my agent --run", `unknown agent preset "my agent --run": want one of claude codex gemini aider opencode goose openclaw, or the command as a list, like [my, agent, --run]`},
	} {
		if err := CheckPreset(tc.name); err == nil || err.Error() != tc.want {
			t.Errorf("CheckPreset(%q) = %v, want %s", tc.name, err, tc.want)
		}
	}
}

// TestParseState_Agent reads every form of "agent" and "fallback" that state.json may
// hold, at step and plan level, and writes each back as it was.
func TestParseState_Agent(t *testing.T) {
	for _, tc := range []struct {
		name, agent, fallback string
		want                  AgentSpec
		wantFallback          []string
		err                   string
	}{
		{name: "argv", agent: `["openclaw", "agent", "--message"]`, want: AgentSpec{Argv: []string{"openclaw", "agent", "--message"}}},
		{name: "preset", agent: `"codex"`, want: AgentSpec{Preset: "codex"}},
		{name: "preset with args", agent: `{"preset": "codex", "args": ["-m", "gpt-5"]}`, want: AgentSpec{Preset: "codex", Args: []string{"-m", "gpt-5"}}},
		{name: "fallback", agent: `"claude"`, fallback: `["codex", "gemini"]`, want: AgentSpec{Preset: "claude"}, wantFallback: []string{"codex", "gemini"}},
		{name: "null", agent: `null`},
		{name: "unknown preset", agent: `"claud"`, err: `plan.steps.a.agent: unknown agent preset "claud": did you mean claude?`},
		{name: "unknown preset in object", agent: `{"preset": "gemeni"}`, err: `plan.steps.a.agent.preset: unknown agent preset "gemeni": did you mean gemini?`},
		{name: "object without preset", agent: `{"args": []}`, err: `plan.steps.a.agent: missing preset`},
		{name: "object with other keys", agent: `{"preset": "codex", "model": "x"}`, err: `plan.steps.a.agent.model: unknown key`},
		{name: "number", agent: `3`, err: `plan.steps.a.agent: want the command as a list of strings, a preset name or {"preset": NAME, "args": [...]}, got the number 3`},
		{name: "unknown fallback", agent: `"claude"`, fallback: `["codex", "gemni"]`, err: `plan.steps.a.fallback[1]: unknown agent preset "gemni": did you mean gemini?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			member := `"agent": ` + tc.agent
			if tc.fallback != "" {
				member += `, "fallback": ` + tc.fallback
			}
			src := `{"plan": {"steps": {"a": {"title": "A", "instruction": "do a", ` + member + `}}}, "stepQueue": ["a"], "stepseq": {` + member + `}}`
			st, err := ParseState(strings.NewReader(src), "state.json")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, got := range []struct {
				agent    AgentSpec
				fallback []string
			}{{st.Steps["a"].Agent, st.Steps["a"].Fallback}, {st.Settings.Agent, st.Settings.Fallback}} {
				if diff := cmp.Diff(tc.want, got.agent); diff != "" {
					t.Errorf("agent (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tc.wantFallback, got.fallback); diff != "" {
					t.Errorf("fallback (-want +got):\n%s", diff)
				}
			}
			// A change elsewhere re-encodes the plan: the agent comes back in the same form.
			st.Steps["a"].Title = "A2"
			again, err := ParseState(strings.NewReader(string(st.Marshal())), "again")
			if err != nil {
				t.Fatalf("re-read: %v\n%s", err, st.Marshal())
			}
			if !again.Steps["a"].Agent.Equal(tc.want) || !again.Settings.Agent.Equal(tc.want) {
				t.Errorf("round trip: %+v, %+v, want %+v", again.Steps["a"].Agent, again.Settings.Agent, tc.want)
			}
		})
	}
}

func TestAgentSpec_MarshalJSON(t *testing.T) {
	for _, tc := range []struct {
		a    AgentSpec
		want string
	}{
		{AgentSpec{Argv: []string{"a", "<b>"}}, `["a","<b>"]`},
		{AgentSpec{Preset: "claude"}, `"claude"`},
		{AgentSpec{Preset: "codex", Args: []string{"-m", "gpt-5"}}, `{"preset":"codex","args":["-m","gpt-5"]}`},
	} {
		got, err := marshal(tc.a)
		if err != nil || string(got) != tc.want {
			t.Errorf("marshal(%+v) = %s, %v; want %s", tc.a, got, err, tc.want)
		}
	}
}

// A changed agent or fallback is a changed plan: the memo must not reuse the old encoding.
func TestState_MarshalAgentChange(t *testing.T) {
	st, err := ParseState(strings.NewReader(`{"plan": {"steps": {"a": {"title": "A", "instruction": "x", "agent": "claude"}}}, "stepQueue": ["a"]}`), "s")
	if err != nil {
		t.Fatal(err)
	}
	st.Steps["a"].Agent.Args = []string{"--model", "opus"}
	st.Steps["a"].Fallback = []string{"codex"}
	out := string(st.Marshal())
	if !strings.Contains(out, `"preset": "claude"`) || !strings.Contains(out, `"--model"`) || !strings.Contains(out, `"fallback"`) {
		t.Errorf("the change was not written:\n%s", out)
	}
}
