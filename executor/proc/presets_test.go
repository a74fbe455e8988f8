package proc

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// The preset table and the names planspec accepts are the same list, in the same order.
func TestPresets_Names(t *testing.T) {
	var names []string
	for _, p := range Presets() {
		names = append(names, p.Name)
		if p.Argv[0] != p.Name || p.Help[0] != p.Name {
			t.Errorf("%s: program %q, help %v", p.Name, p.Argv[0], p.Help)
		}
	}
	if !slices.Equal(names, planspec.AgentPresets) {
		t.Errorf("executor presets %v, planspec %v", names, planspec.AgentPresets)
	}
}

func TestResolvePreset(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"claude", nil, []string{"claude", "-p", "--output-format", "json", "--permission-mode", "acceptEdits"}},
		{"codex", nil, []string{"codex", "exec", "--json", "--skip-git-repo-check", "-s", "workspace-write"}},
		{"gemini", nil, []string{"gemini", "--output-format", "json", "--approval-mode", "yolo", "-p"}},
		{"aider", nil, []string{"aider", "--yes-always", "--no-auto-commits", "--message"}},
		{"opencode", nil, []string{"opencode", "run", "--format", "json"}},
		{"goose", nil, []string{"goose", "run", "--no-session", "-q", "-t"}},
		{"openclaw", nil, []string{"openclaw", "agent", "--message"}},
		// Extra arguments go before the prompt and before the flag that takes it.
		{"codex", []string{"-m", "gpt-5"}, []string{"codex", "exec", "--json", "--skip-git-repo-check", "-s", "workspace-write", "-m", "gpt-5"}},
		{"gemini", []string{"-m", "gemini-2.5-pro"}, []string{"gemini", "--output-format", "json", "--approval-mode", "yolo", "-m", "gemini-2.5-pro", "-p"}},
		// Args that place {prompt} give its flag themselves.
		{"gemini", []string{"--prompt", "{prompt}", "-m", "x"}, []string{"gemini", "--output-format", "json", "--approval-mode", "yolo", "--prompt", "{prompt}", "-m", "x"}},
	} {
		t.Run(tc.name+strings.Join(tc.args, "_"), func(t *testing.T) {
			got, err := ResolvePreset(tc.name, tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("argv (-want +got):\n%s", diff)
			}
		})
	}
	_, err := ResolvePreset("claud", nil)
	if !errors.Is(err, core.ErrConfig) || !strings.Contains(err.Error(), `unknown agent preset "claud": did you mean claude?`) {
		t.Errorf("ResolvePreset(claud) = %v", err)
	}
}

func TestAgent_Command(t *testing.T) {
	many := make([]string, 150)
	for i := range many {
		many[i] = fmt.Sprintf("f%03d.go", 149-i)
	}
	for _, tc := range []struct {
		name    string
		argv    []string
		changed []string
		want    []string
	}{
		{"prompt appended", []string{"agent", "--message"}, nil, []string{"agent", "--message", "P"}},
		{"prompt placed", []string{"agent", "--message", "{prompt}", "--yes"}, nil, []string{"agent", "--message", "P", "--yes"}},
		{"changed placed", []string{"lint", "{changed}", "--"}, []string{"b.go", "a.go", "b.go", "", "bad\nname"}, []string{"lint", "a.go", "b.go", "--", "P"}},
		{"nothing changed", []string{"lint", "{changed}"}, nil, []string{"lint", "P"}},
		{"at most 100", []string{"x", "{changed}", "{prompt}"}, many, append(append([]string{"x"}, ChangedPaths(many)...), "P")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Agent{Argv: tc.argv}.Command("P", tc.changed)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("argv (-want +got):\n%s", diff)
			}
		})
	}
	if got := ChangedPaths(many); len(got) != MaxChanged || got[0] != "f000.go" || got[99] != "f099.go" {
		t.Errorf("ChangedPaths: %d paths, %v … %v", len(got), got[0], got[len(got)-1])
	}
}

func TestAgentEnv(t *testing.T) {
	ws := store.Workspace{Dir: "/ws", State: "/ws/state.json"}
	base := []string{"PATH=/bin", "STEPSEQ_CHANGED=stale.go", "STEPSEQ_STEP=old", "STEPSEQ_TOKEN=the-listeners-token", "HOME=/root"}
	got := AgentEnv(base, "build/x", 3, ws, []string{"src/b.go", "src/a.go"})
	want := []string{"PATH=/bin", "HOME=/root",
		"STEPSEQ_STEP=build/x", "STEPSEQ_TRY=3", "STEPSEQ_WORKSPACE=/ws", "STEPSEQ_STATE=/ws/state.json",
		"STEPSEQ_REPORTS=/ws/.stepseq/reports/build%2Fx", "STEPSEQ_RUN=main", "STEPSEQ_CHANGED=src/a.go\nsrc/b.go"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if got := AgentEnv(base, "s", 1, ws, nil); got[len(got)-1] != "STEPSEQ_CHANGED=" {
		t.Errorf("nothing changed: %q", got[len(got)-1])
	}
	if base[1] != "STEPSEQ_CHANGED=stale.go" {
		t.Error("AgentEnv changed its base")
	}
}

func TestReportHint(t *testing.T) {
	if ReportHint("") != "" || WithReportHint("do it", "") != "do it" {
		t.Error("a plan that asks for no reports gets a hint")
	}
	for _, mode := range []string{ReportsRequired, ReportsOptional} {
		hint := ReportHint(mode)
		lines := strings.Split(hint, "\n")
		if len(lines) != 2 || !strings.Contains(lines[0], "stepseq report accepted --summary") ||
			!strings.Contains(lines[1], "stepseq report done --summary") || !strings.Contains(lines[1], "$STEPSEQ_REPORTS") {
			t.Errorf("%s: hint is not two lines saying how to report:\n%s", mode, hint)
		}
		for _, field := range []string{"--evidence", "--risk", "--next"} {
			if !strings.Contains(lines[0], field) || !strings.Contains(lines[1], field) {
				t.Errorf("%s: a line lacks %s", mode, field)
			}
		}
		if got := WithReportHint("Write the paper.\n", mode); got != "Write the paper.\n\n"+hint {
			t.Errorf("%s: prompt = %q", mode, got)
		}
	}
	if !strings.Contains(ReportHint(ReportsRequired), "fails") || strings.Contains(ReportHint(ReportsOptional), "fails") {
		t.Error("only required reports warn that the try fails without one")
	}
}

// claudeJSON is a result line as `claude -p --output-format json` prints it.
func claudeJSON(isError bool, result string) string {
	return fmt.Sprintf(`{"type":"result","subtype":"success","is_error":%t,"duration_ms":12,"num_turns":1,"result":%q,"session_id":"s1","total_cost_usd":0.01}`+"\n", isError, result)
}

// claudeJSONReal is claude 2.1's result in its own key order: type near the end.
func claudeJSONReal(isError bool, result string) string {
	return fmt.Sprintf(`{"subtype":"success","is_error":%t,"api_error_status":null,"duration_ms":12,"duration_api_ms":10,"num_turns":1,"result":%q,"stop_reason":"end_turn",`+
		`"session_id":"s1","total_cost_usd":0.01,"usage":{"input_tokens":3,"output_tokens":5},"permission_denials":[],"type":"result","uuid":"u1"}`+"\n", isError, result)
}

func TestPreset_Judge(t *testing.T) {
	long := strings.Repeat("x", 3*TailBytes)
	for _, tc := range []struct {
		name        string
		preset      string
		exit        core.Exit
		failed      string // a prefix of the want
		unavailable bool
	}{
		{"claude success", "claude", core.Exit{Stdout: claudeJSON(false, "Done.")}, "", false},
		{"claude is_error on exit 0", "claude", core.Exit{Stdout: claudeJSON(true, "Error: the tool failed")}, "claude: Error: the tool failed", false},
		{"claude usage limit", "claude", core.Exit{Code: 1, Stdout: claudeJSON(true, "You've hit your limit · resets 4pm")}, "claude: You've hit your limit", true},
		{"claude bad key", "claude", core.Exit{Code: 1, Stdout: claudeJSON(true, "Invalid API key · Please run /login")}, "claude: Invalid API key", true},
		{"claude subtype only", "claude", core.Exit{Stdout: `{"type":"result","subtype":"error_max_turns","is_error":true}`}, "claude: error_max_turns", false},
		{"claude result past the tail", "claude", core.Exit{Stdout: claudeJSON(true, long)[:captureBytes], StdoutTail: claudeJSON(true, long)[3*TailBytes-TailBytes:]}, "claude: xxx", false},
		{"claude result past the tail, type at the end", "claude", core.Exit{Stdout: claudeJSONReal(true, long)[:captureBytes], StdoutTail: claudeJSONReal(true, long)[3*TailBytes-TailBytes:]}, "claude: xxx", false},
		{"claude real key order, after other lines, cut", "claude", core.Exit{Stdout: ("noise\n" + claudeJSONReal(true, long))[:captureBytes], StdoutTail: "xxxx"}, "claude: xxx", false},
		{"claude real key order, success", "claude", core.Exit{Stdout: claudeJSONReal(false, long)[:captureBytes], StdoutTail: "xxxx"}, "", false},
		{"claude rate limit on stderr", "claude", core.Exit{Code: 1, Stderr: "API Error: 429 rate_limit_error"}, "claude: rate or usage limit: API Error: 429", true},
		{"claude plain failure", "claude", core.Exit{Code: 1, Stderr: "boom"}, "", false},
		{"codex turn failed", "codex", core.Exit{Code: 1, Stdout: `{"type":"thread.started","thread_id":"t"}` + "\n" + `{"type":"turn.started"}` + "\n" +
			`{"type":"error","message":"You've hit your usage limit. Try again at 12:16 PM."}` + "\n" +
			`{"type":"turn.failed","error":{"message":"You've hit your usage limit. Try again at 12:16 PM."}}` + "\n"}, "codex: You've hit your usage limit", true},
		{"codex failed turn, exit 0", "codex", core.Exit{Stdout: `{"type":"turn.failed","error":{"message":"stream disconnected"}}` + "\n"}, "codex: stream disconnected", false},
		{"codex recovered", "codex", core.Exit{Stdout: `{"type":"error","message":"Reconnecting... 1/5"}` + "\n" + `{"type":"turn.completed","usage":{}}` + "\n"}, "", false},
		{"codex not logged in", "codex", core.Exit{Code: 1, Stderr: "Error: Not logged in. Run codex login"}, "codex: authentication failed", true},
		{"gemini auth", "gemini", core.Exit{Code: 41, Stdout: "{\n  \"session_id\": \"s\",\n  \"error\": {\n    \"type\": \"Error\",\n    \"message\": \"Please set an Auth method\",\n    \"code\": 41\n  }\n}\n"}, "gemini: authentication failed (exit 41): Please set an Auth method", true},
		{"gemini input", "gemini", core.Exit{Code: 42, Stderr: "no input"}, "gemini: invalid input (exit 42): no input", false},
		{"gemini sandbox", "gemini", core.Exit{Code: 44}, "gemini: sandbox error (exit 44)", false},
		{"gemini config", "gemini", core.Exit{Code: 52}, "gemini: configuration error (exit 52)", false},
		{"gemini turn limit", "gemini", core.Exit{Code: 53}, "gemini: turn limit reached (exit 53)", false},
		{"gemini quota", "gemini", core.Exit{Code: 1, Stderr: "TerminalQuotaError: You have exhausted your capacity on this model."}, "gemini: TerminalQuotaError", true},
		{"gemini success", "gemini", core.Exit{Stdout: "{\n  \"session_id\": \"s\",\n  \"response\": \"ok\"\n}\n"}, "", false},
		{"opencode error event, exit 0", "opencode", core.Exit{Stdout: `{"type":"step_start"}` + "\n" + `{"type":"error","sessionID":"s","error":{"name":"UnknownError","data":{"message":"Unexpected server error"}}}` + "\n"}, "opencode: UnknownError: Unexpected server error", false},
		{"opencode auth event", "opencode", core.Exit{Stdout: `{"type":"error","error":{"name":"ProviderAuthError","data":{"message":"no key"}}}` + "\n"}, "opencode: ProviderAuthError", true},
		{"opencode stderr only, exit 0", "opencode", core.Exit{Stderr: "NotFoundError: Session not found: ses_x\n at x"}, "opencode: NotFoundError: Session not found", false},
		{"opencode success", "opencode", core.Exit{Stdout: `{"type":"text","part":{"text":"error handling done"}}` + "\n"}, "", false},
		{"aider rate limit", "aider", core.Exit{Code: 1, Stderr: "litellm.RateLimitError: rate limit exceeded"}, "aider: rate or usage limit", true},
		{"goose plain failure", "goose", core.Exit{Code: 2, Stderr: "bad flag"}, "", false},
		{"a rate limit in a successful try is work", "openclaw", core.Exit{Stdout: "implemented the rate limit"}, "", false},
		{"wrapper did not find it", "openclaw", core.Exit{Code: 127, Stderr: "openclaw: command not found"}, "agent could not start: openclaw: command not found", true},
		{"could not start", "codex", core.Exit{Code: -1, Err: &exec.Error{Name: "codex", Err: exec.ErrNotFound}}, "agent could not start", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := LookupPreset(tc.preset)
			if !ok {
				t.Fatalf("no preset %s", tc.preset)
			}
			failed, unavailable := p.Judge(tc.exit)
			if !strings.HasPrefix(failed, tc.failed) || (tc.failed == "") != (failed == "") || unavailable != tc.unavailable {
				t.Errorf("Judge = %q, %v; want %q…, %v", failed, unavailable, tc.failed, tc.unavailable)
			}
		})
	}
}

// A command given as a list is judged only on whether it started.
func TestAgent_JudgeCommand(t *testing.T) {
	a := Agent{Argv: []string{"/bin/myagent"}}
	if failed, unavailable := a.Judge(core.Exit{Code: 1, Stderr: "rate limit"}); failed != "" || unavailable {
		t.Errorf("plain failure = %q, %v", failed, unavailable)
	}
	if _, unavailable := a.Judge(core.Exit{Code: 127}); !unavailable {
		t.Error("exit 127 is not unavailable")
	}
}

// judgeExit judges the end of agent a's try as the machine does: the agent's own
// reading of its output, then the exit (core.JudgeExit). A try that ended well
// is OK here; its outputs and check are the machine's to verify.
func judgeExit(a Agent, exit core.Exit) core.Verdict {
	failed, _ := a.Judge(exit)
	if v, ended := core.JudgeExit(failed, exit); ended {
		return v
	}
	return core.Verdict{OK: true}
}

func TestJudgeExit(t *testing.T) {
	claude := Agent{Preset: "claude"}
	if v := judgeExit(claude, core.Exit{Stdout: claudeJSON(true, "could not edit")}); v.OK || v.Error != "claude: could not edit" {
		t.Errorf("is_error on exit 0: %+v", v)
	}
	if v := judgeExit(claude, core.Exit{Stdout: claudeJSON(false, "ok")}); !v.OK {
		t.Errorf("success: %+v", v)
	}
	if v := judgeExit(claude, core.Exit{Code: 1, Stderr: "boom"}); v.OK || v.Error != "boom" {
		t.Errorf("plain failure keeps stderr: %+v", v)
	}
	if v := judgeExit(claude, core.Exit{TimedOut: true, Stdout: claudeJSON(true, "x")}); v.Error != "Timeout" {
		t.Errorf("timeout: %+v", v)
	}
}

func TestCapture_Tail(t *testing.T) {
	var c capture
	for i := range 20000 {
		fmt.Fprintf(&c, "line %05d\n", i)
	}
	tail := c.Tail()
	if len(tail) != TailBytes || !strings.HasSuffix(tail, "line 19999\n") {
		t.Errorf("tail: %d bytes ending %q", len(tail), tail[len(tail)-20:])
	}
	if head := c.String(); len(head) != captureBytes || !strings.HasPrefix(head, "line 00000\n") {
		t.Errorf("head: %d bytes", len(head))
	}
	var big capture
	big.Write([]byte(strings.Repeat("a", TailBytes) + "end"))
	if tail := big.Tail(); len(tail) != TailBytes || !strings.HasSuffix(tail, "aend") {
		t.Errorf("one big write: %d bytes", len(tail))
	}
	var small capture
	small.Write([]byte("short"))
	if small.Tail() != "short" {
		t.Errorf("short output: %q", small.Tail())
	}
}

// BenchmarkPreset_Judge reads the verdict of a try from a full tail of output:
// claude's result line after 64 KiB of other output, codex's failed turn at the end
// of a stream of events.
func BenchmarkPreset_Judge(b *testing.B) {
	noise := strings.Repeat(`{"type":"assistant","message":{"content":[{"type":"text","text":"working"}]}}`+"\n", TailBytes/40)
	claudeOut := (noise + claudeJSON(true, "Edit failed"))
	claudeOut = claudeOut[len(claudeOut)-TailBytes:]
	codexOut := strings.Repeat(`{"type":"item.completed","item":{"type":"agent_message","text":"step"}}`+"\n", TailBytes/80) +
		`{"type":"turn.failed","error":{"message":"You've hit your usage limit."}}` + "\n"
	for _, bc := range []struct {
		preset string
		exit   core.Exit
	}{
		{"claude", core.Exit{StdoutTail: claudeOut}},
		{"codex", core.Exit{Code: 1, StdoutTail: codexOut}},
	} {
		p, _ := LookupPreset(bc.preset)
		b.Run(bc.preset, func(b *testing.B) {
			b.SetBytes(int64(len(bc.exit.StdoutTail)))
			for b.Loop() {
				if failed, _ := p.Judge(bc.exit); failed == "" {
					b.Fatal("no failure read")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/judge")
		})
	}
}

// claude under --permission-mode acceptEdits refused `python3 gen.py`: its
// result lists it in permission_denials with exit 0 and is_error false. The
// failed try's error names the tool, its input and the mode that refused it.
func TestAgent_RefusedNamesClaudesDenials(t *testing.T) {
	a := Agent{Argv: []string{"claude", "-p", "--output-format", "json", "--permission-mode", "acceptEdits"}, Preset: "claude"}
	out := `{"subtype":"success","is_error":false,"result":"I could not run it.","session_id":"s1",` +
		`"permission_denials":[{"tool_name":"Bash","tool_use_id":"toolu_1","tool_input":{"command":"python3 gen.py","description":"Generate"}}],"type":"result","uuid":"u"}` + "\n"
	got := a.Refused(core.Exit{Stdout: out})
	for _, want := range []string{"--permission-mode acceptEdits refused", "Bash(python3 gen.py)", "--allowedTools"} {
		if !strings.Contains(got, want) {
			t.Errorf("Refused = %q, want it to say %q", got, want)
		}
	}
	if got := a.Refused(core.Exit{Stdout: claudeJSON(false, "done")}); got != "" {
		t.Errorf("no denials: Refused = %q", got)
	}
	if got := (Agent{Argv: []string{"x"}}).Refused(core.Exit{Stdout: out}); got != "" {
		t.Errorf("a plain command: Refused = %q", got)
	}
}
