package engine

import (
	"os"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/planspec"
)

// An agent argument's template renders to one argument, whatever it holds;
// state.json keeps the rendering in the step's agent and the template beside it.
func TestCheck_AgentArgumentTemplates(t *testing.T) {
	t.Parallel()
	w := newTestWS(t, "")
	w.write(plan(`"stepseq":{"agent":[`+quoteJSON(agentBinary(t))+`,"--name=${params.name}","${params.words}"],"params":{"name":"x","words":"two words; rm -rf /"}}`,
		`"instruction":"argsfile:args.txt"`))
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	st := w.read()
	if st.Status != planspec.StatusDone {
		t.Fatalf("status %s, error %s", st.Status, errText(st.Run("s1")))
	}
	args, err := os.ReadFile(w.path("args.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Split(string(args), "\n"); len(got) != 3 || got[0] != "--name=x" || got[1] != "two words; rm -rf /" || got[2] != "argsfile:args.txt" {
		t.Errorf("the agent's arguments = %q", got)
	}
	sp := st.Steps["s1"]
	if len(sp.Agent.Argv) != 3 || sp.Agent.Argv[2] != "two words; rm -rf /" || sp.AgentTemplate.Argv[2] != "${params.words}" {
		t.Errorf("state.json: agent %q, agentTemplate %q", sp.Agent.Argv, sp.AgentTemplate.Argv)
	}
}

// A value that would add an option, and a template that fails to evaluate,
// fail the try with the reason before anything is launched: no agent runs, no
// log is opened.
func TestCheck_AgentArgumentTemplateRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, arg, params, want string }{
		{"an option", "${params.words}", `{"words":"-c"}`, "a template may not add an option"},
		{"no such result", "${steps.s0.result.x}", `{}`, "template ${steps.s0.result.x}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newTestWS(t, "")
			w.write(plan(`"stepseq":{"params":`+tc.params+`}`,
				`"instruction":"argsfile:args.txt","retries":1,"agent":[`+quoteJSON(agentBinary(t))+`,`+quoteJSON(tc.arg)+`]`))
			if err := w.check(); err != nil {
				t.Fatal(err)
			}
			st := w.read()
			run := st.Run("s1")
			if run.Status != planspec.StatusFailed || !strings.Contains(errText(run), "agent: argument 1") || !strings.Contains(errText(run), tc.want) {
				t.Errorf("status %s, error %q; want %q", run.Status, errText(run), tc.want)
			}
			if w.exists("args.txt") || w.exists(".stepseq/logs/s1") {
				t.Error("the agent ran")
			}
		})
	}
}

// A preset's extra arguments render as a command's do: the CLI gets each
// rendered value as one argument, after its own flags.
func TestCheck_PresetArgumentTemplates(t *testing.T) {
	bin := fakeBin(t, "codex")
	fakeScript(t, bin, "codex", `{"type":"turn.completed"}`+"\n", "", 0)
	w := newTestWS(t, plan(`"stepseq":{"agent":{"preset":"codex","args":["-m","${params.model}"]},"params":{"model":"gpt 5"}}`, `"instruction":"do s1"`))
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	runs := fakeRuns(t, bin, "codex")
	if len(runs) != 1 {
		t.Fatalf("codex ran %d times; state %s", len(runs), errText(w.read().Run("s1")))
	}
	argv := runs[0].Argv
	if n := len(argv); n < 3 || argv[n-3] != "-m" || argv[n-2] != "gpt 5" || argv[n-1] != "do s1" {
		t.Errorf("codex ran as %q", argv)
	}
}
