package engine

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// fakeCLIPath is testdata/fakecli, built by TestMain: copied under a CLI's name
// (claude, codex, …) it records how it was run and answers as its script says.
var fakeCLIPath string

// fakeRecord is one run of a fake CLI (testdata/fakecli's Record).
type fakeRecord struct {
	Argv  []string          `json:"argv"`
	Stdin string            `json:"stdin"`
	Fd0   string            `json:"fd0"`
	Env   map[string]string `json:"env"`
	Start time.Time         `json:"start"`
}

// fakeBin makes a folder holding a fake CLI under each name and makes it the whole
// PATH, so that only those CLIs exist.
func fakeBin(t testing.TB, names ...string) string {
	t.Helper()
	bin := t.TempDir()
	prog, err := os.ReadFile(fakeCLIPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		// A copy, not a link: the fake finds its script and record beside its own file.
		if err := os.WriteFile(filepath.Join(bin, name), prog, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin)
	return bin
}

// fakeAnswer is one answer of a fake CLI.
type fakeAnswer struct {
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	Exit   int    `json:"exit"`
}

// fakeScripts sets how the fake CLI called name answers its runs, one after the
// other, the last one for every run past them.
func fakeScripts(t testing.TB, bin, name string, runs ...fakeAnswer) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"runs": runs})
	if err := os.WriteFile(filepath.Join(bin, name+".script"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// fakeScript sets what the fake CLI called name prints and how it exits.
func fakeScript(t *testing.T, bin, name, stdout, stderr string, exit int) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"stdout": stdout, "stderr": stderr, "exit": exit})
	if err := os.WriteFile(filepath.Join(bin, name+".script"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// fakeRuns reads every run of the fake CLI called name.
func fakeRuns(t testing.TB, bin, name string) []fakeRecord {
	t.Helper()
	f, err := os.Open(filepath.Join(bin, name+".record"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []fakeRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r fakeRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s.record: %v", name, err)
		}
		out = append(out, r)
	}
	return out
}

// runAgent starts argv through Start and waits for its exit, with a deadline.
func runAgent(t *testing.T, spec proc.Spec) core.Exit {
	t.Helper()
	p, err := proc.Start(spec)
	if err != nil {
		return proc.StartFailure(err)
	}
	select {
	case exit := <-p.Done():
		return exit
	case <-time.After(effectWait):
		p.Stop()
		<-p.Done()
		t.Fatalf("%s did not exit within 30s", spec.Argv[0])
		return core.Exit{}
	}
}

// runTry is a launch path in small: it runs one try with the first candidate that
// can run and falls back, journaled, to the next one while the agent says it is
// unavailable. It returns the agent whose exit stands.
func runTry(t *testing.T, agents []proc.Agent, ws store.Workspace, step string, try int, prompt string, j *store.Journal) (proc.Agent, core.Exit) {
	t.Helper()
	i := proc.NextAgent(agents, -1)
	for k := range i {
		if err := j.Record(proc.FallbackEntry(step, try, agents[k], agents[i], agents[k].Unavailable)); err != nil {
			t.Fatal(err)
		}
	}
	for {
		a := agents[i]
		exit := runAgent(t, proc.Spec{Argv: a.Command(prompt, nil), Dir: ws.Dir, Env: proc.AgentEnv(os.Environ(), step, try, ws, nil)})
		failed, unavailable := a.Judge(exit)
		next := proc.NextAgent(agents, i)
		if !unavailable || next < 0 {
			return a, exit
		}
		if err := j.Record(proc.FallbackEntry(step, try, a, agents[next], failed)); err != nil {
			t.Fatal(err)
		}
		i = next
	}
}

// journalEntries reads the journal's records.
func journalEntries(t *testing.T, path string) []core.Entry {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []core.Entry
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e core.Entry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func presetState(agent planspec.AgentSpec, fallback ...string) *planspec.State {
	st := planspec.NewState()
	st.Steps["s"] = &planspec.StepSpec{Title: "S", Instruction: "do s"}
	st.StepQueue = []string{"s"}
	st.Settings.Agent = agent
	st.Settings.Fallback = fallback
	return st
}

func testWorkspace(t *testing.T) store.Workspace {
	dir := t.TempDir()
	return store.Workspace{Dir: dir, State: filepath.Join(dir, "state.json")}
}

// Every preset, resolved from a plan and run through Start, gets its preset argv with
// the prompt last, stdin from /dev/null, and what it is told in its environment.
func TestPresets_FakeCLIs(t *testing.T) {
	const prompt = "Write paper.md from notes.md"
	for _, p := range proc.Presets() {
		t.Run(p.Name, func(t *testing.T) {
			bin := fakeBin(t, p.Name)
			ws := testWorkspace(t)
			agents, err := proc.ResolveAgents(presetState(planspec.AgentSpec{Preset: p.Name, Args: []string{"--extra", "{changed}"}}), "s", os.Getenv, ws.Dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(agents) != 1 || agents[0].Argv[0] != filepath.Join(bin, p.Name) || agents[0].Source != "stepseq.agent" {
				t.Fatalf("agents = %+v", agents)
			}
			changed := []string{"notes.md", "refs/b.md"}
			exit := runAgent(t, proc.Spec{Argv: agents[0].Command(prompt, changed), Dir: ws.Dir, Env: proc.AgentEnv(os.Environ(), "s", 2, ws, changed)})
			if exit.Code != 0 || exit.Err != nil {
				t.Fatalf("exit %d %v: %s", exit.Code, exit.Err, exit.Stderr)
			}
			runs := fakeRuns(t, bin, p.Name)
			if len(runs) != 1 {
				t.Fatalf("%d runs", len(runs))
			}
			r := runs[0]
			want := append(slices.Clone(p.Argv[1:]), "--extra", "notes.md", "refs/b.md")
			if p.PromptFlag != "" {
				want = append(want, p.PromptFlag)
			}
			want = append(want, prompt)
			if diff := cmp.Diff(want, r.Argv[1:]); diff != "" {
				t.Errorf("argv (-want +got):\n%s", diff)
			}
			if r.Stdin != "" || r.Fd0 != os.DevNull {
				t.Errorf("stdin %q from %q, want nothing from %s", r.Stdin, r.Fd0, os.DevNull)
			}
			for k, v := range map[string]string{"STEPSEQ_STEP": "s", "STEPSEQ_TRY": "2", "STEPSEQ_WORKSPACE": ws.Dir,
				"STEPSEQ_STATE": ws.State, "STEPSEQ_REPORTS": filepath.Join(ws.Dir, ".stepseq", "reports", "s"),
				"STEPSEQ_CHANGED": "notes.md\nrefs/b.md"} {
				if r.Env[k] != v {
					t.Errorf("%s = %q, want %q", k, r.Env[k], v)
				}
			}
		})
	}
}

// An agent's stdin is /dev/null even when stepseq's own stdin is a pipe held
// open: codex exec, which reads its stdin to the end, gets end of file at once.
func TestStart_StdinIsDevNull(t *testing.T) {
	bin := fakeBin(t, "codex")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close() // held open for the whole test: a reader of it would block
	saved, err := unix.Dup(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Dup2(int(r.Fd()), 0); err != nil {
		t.Fatal(err)
	}
	defer func() {
		unix.Dup2(saved, 0)
		unix.Close(saved)
	}()
	argv, _ := proc.ResolvePreset("codex", nil)
	argv[0] = filepath.Join(bin, "codex")
	exit := runAgent(t, proc.Spec{Argv: append(argv, "say hi"), Dir: t.TempDir(), Env: os.Environ()})
	if exit.Code != 0 {
		t.Fatalf("exit %d: %s", exit.Code, exit.Stderr)
	}
	runs := fakeRuns(t, bin, "codex")
	if len(runs) != 1 || runs[0].Fd0 != os.DevNull || runs[0].Stdin != "" {
		t.Errorf("runs = %+v, want one run reading nothing from %s", runs, os.DevNull)
	}
}

// The first agent is not installed: the same try runs with the fallback, journaled.
func TestFallback_NotFound(t *testing.T) {
	bin := fakeBin(t, "codex")
	ws := testWorkspace(t)
	agents, err := proc.ResolveAgents(presetState(planspec.AgentSpec{Preset: "claude"}, "codex"), "s", os.Getenv, ws.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(agents) != 2 || !strings.Contains(agents[0].Unavailable, `agent "claude" not found on PATH`) || agents[1].Unavailable != "" {
		t.Fatalf("agents = %+v", agents)
	}
	j := &store.Journal{Path: filepath.Join(ws.Dir, "journal.jsonl")}
	defer j.Close()
	a, exit := runTry(t, agents, ws, "s", 3, "do s", j)
	if a.Preset != "codex" || exit.Code != 0 {
		t.Fatalf("ran %s, exit %d", a.Name(), exit.Code)
	}
	runs := fakeRuns(t, bin, "codex")
	if len(runs) != 1 || runs[0].Env["STEPSEQ_TRY"] != "3" {
		t.Fatalf("codex runs = %+v, want one, try 3", runs)
	}
	es := journalEntries(t, j.Path)
	if len(es) != 1 || es[0].Event != "fallback" || es[0].Try != 3 || es[0].Detail["from"] != "claude" || es[0].Detail["to"] != "codex" ||
		!strings.Contains(es[0].Reason, "not found on PATH") {
		t.Errorf("journal = %+v", es)
	}
}

// The first agent runs and says it hit its usage limit: the second runs the same
// try, with the same STEPSEQ_TRY, and its verdict stands.
func TestFallback_RateLimit(t *testing.T) {
	bin := fakeBin(t, "claude", "codex")
	fakeScript(t, bin, "claude", claudeJSON(true, "You've hit your limit · resets 4pm"), "", 1)
	fakeScript(t, bin, "codex", `{"type":"turn.completed","usage":{}}`+"\n", "", 0)
	ws := testWorkspace(t)
	st := presetState(planspec.AgentSpec{Preset: "claude"}, "codex")
	agents, err := proc.ResolveAgents(st, "s", os.Getenv, ws.Dir)
	if err != nil {
		t.Fatal(err)
	}
	j := &store.Journal{Path: filepath.Join(ws.Dir, "journal.jsonl")}
	defer j.Close()
	a, exit := runTry(t, agents, ws, "s", 1, "do s", j)
	if a.Preset != "codex" {
		t.Fatalf("the try ended with %s", a.Name())
	}
	if v := judgeExit(a, exit); !v.OK {
		t.Errorf("verdict %+v", v)
	}
	c, x := fakeRuns(t, bin, "claude"), fakeRuns(t, bin, "codex")
	if len(c) != 1 || len(x) != 1 || c[0].Env["STEPSEQ_TRY"] != "1" || x[0].Env["STEPSEQ_TRY"] != "1" {
		t.Fatalf("claude runs %d, codex runs %d, tries %v %v", len(c), len(x), c, x)
	}
	es := journalEntries(t, j.Path)
	if len(es) != 1 || es[0].Event != "fallback" || es[0].Reason != "claude: You've hit your limit · resets 4pm" {
		t.Errorf("journal = %+v", es)
	}
}

// Every candidate unavailable: the last one's failure is the try's.
func TestFallback_Exhausted(t *testing.T) {
	bin := fakeBin(t, "claude", "gemini")
	fakeScript(t, bin, "claude", claudeJSON(true, "Invalid API key · Please run /login"), "", 1)
	fakeScript(t, bin, "gemini", "{\n  \"error\": {\n    \"type\": \"Error\",\n    \"message\": \"Please set an Auth method\",\n    \"code\": 41\n  }\n}\n", "", 41)
	ws := testWorkspace(t)
	st := presetState(planspec.AgentSpec{Preset: "claude"}, "gemini")
	agents, err := proc.ResolveAgents(st, "s", os.Getenv, ws.Dir)
	if err != nil {
		t.Fatal(err)
	}
	j := &store.Journal{Path: filepath.Join(ws.Dir, "journal.jsonl")}
	defer j.Close()
	a, exit := runTry(t, agents, ws, "s", 1, "do s", j)
	v := judgeExit(a, exit)
	if a.Preset != "gemini" || v.OK || v.Error != "gemini: authentication failed (exit 41): Please set an Auth method" {
		t.Errorf("ended with %s: %+v", a.Name(), v)
	}
	if es := journalEntries(t, j.Path); len(es) != 1 {
		t.Errorf("journal = %+v", es)
	}
}

// claude exits 0 with is_error: true: the try fails with its result text, and
// since that is no unavailability, no fallback runs.
func TestClaude_IsErrorFailsTheTry(t *testing.T) {
	bin := fakeBin(t, "claude", "codex")
	fakeScript(t, bin, "claude", `{"type":"system","subtype":"init"}`+"\n"+claudeJSON(true, "Edit failed: permission denied for paper.md"), "", 0)
	ws := testWorkspace(t)
	st := presetState(planspec.AgentSpec{Preset: "claude"}, "codex")
	agents, err := proc.ResolveAgents(st, "s", os.Getenv, ws.Dir)
	if err != nil {
		t.Fatal(err)
	}
	j := &store.Journal{Path: filepath.Join(ws.Dir, "journal.jsonl")}
	defer j.Close()
	a, exit := runTry(t, agents, ws, "s", 1, "do s", j)
	if exit.Code != 0 {
		t.Fatalf("exit %d", exit.Code)
	}
	v := judgeExit(a, exit)
	if a.Preset != "claude" || v.OK || v.Error != "claude: Edit failed: permission denied for paper.md" {
		t.Errorf("%s: %+v", a.Name(), v)
	}
	if runs := fakeRuns(t, bin, "codex"); len(runs) != 0 {
		t.Errorf("codex ran %d times", len(runs))
	}
}

func TestResolveAgents(t *testing.T) {
	bin := fakeBin(t, "claude", "codex", "gemini")
	dir := t.TempDir()
	getenv := func(k string) string {
		if k == "STEP_AGENT_CMD" {
			return "claude -p"
		}
		return ""
	}
	names := func(as []proc.Agent) string {
		var out []string
		for _, a := range as {
			s := a.Name() + "@" + a.Source
			if a.Unavailable != "" {
				s += "(missing)"
			}
			out = append(out, s)
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		name string
		st   func() *planspec.State
		want string
		err  string
	}{
		{"STEP_AGENT_CMD and the plan's fallback", func() *planspec.State {
			return presetState(planspec.AgentSpec{}, "codex")
		}, "claude@STEP_AGENT_CMD codex@stepseq.fallback[0]", ""},
		{"the step's fallback replaces the plan's", func() *planspec.State {
			st := presetState(planspec.AgentSpec{Preset: "claude"}, "codex")
			st.Steps["s"].Fallback = []string{"gemini", "claude", "gemini"}
			return st
		}, "claude@stepseq.agent gemini@plan.steps.s.fallback[0]", ""},
		{"a missing fallback stays, marked", func() *planspec.State {
			st := presetState(planspec.AgentSpec{Preset: "codex", Args: []string{"-m", "x"}}, "aider", "codex")
			return st
		}, "codex@stepseq.agent aider@stepseq.fallback[0](missing) codex@stepseq.fallback[1]", ""},
		{"nothing can run", func() *planspec.State {
			return presetState(planspec.AgentSpec{Preset: "goose"}, "aider")
		}, "", `stepseq.agent: agent "goose" not found on PATH: install it or give its full path, nor is any fallback (aider)`},
		{"a preset's -c is its own", func() *planspec.State {
			return presetState(planspec.AgentSpec{Preset: "codex", Args: []string{"-c", `model="o3"`}})
		}, "codex@stepseq.agent", ""},
		{"a shell is refused", func() *planspec.State {
			return presetState(planspec.AgentSpec{Argv: []string{"sh", "-c"}}, "codex")
		}, "", "is a shell"},
		{"unknown preset", func() *planspec.State {
			return presetState(planspec.AgentSpec{Preset: "claud"})
		}, "", `stepseq.agent: unknown agent preset "claud": did you mean claude?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agents, err := proc.ResolveAgents(tc.st(), "s", getenv, dir)
			if tc.err != "" {
				if !errorsIsConfig(err) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := names(agents); got != tc.want {
				t.Errorf("candidates %s, want %s", got, tc.want)
			}
		})
	}
	// ResolveAgent is the first that can run.
	a, err := proc.ResolveAgent(presetState(planspec.AgentSpec{Preset: "aider"}, "gemini"), "s", getenv, dir)
	if err != nil || a.Preset != "gemini" || a.Argv[0] != filepath.Join(bin, "gemini") {
		t.Errorf("ResolveAgent = %+v, %v", a, err)
	}
	if got := strconv.Itoa(proc.NextAgent(nil, -1)); got != "-1" {
		t.Errorf("NextAgent(nil) = %s", got)
	}
}

func errorsIsConfig(err error) bool { return errors.Is(err, core.ErrConfig) }
