package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/internal/testwait"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// testWS is a workspace in a temp dir whose agent is the fake agent.
type testWS struct {
	t     *testing.T
	dir   string
	state string
	env   map[string]string
}

func newTestWS(t *testing.T, stateJSON string) *testWS {
	t.Helper()
	dir := t.TempDir()
	w := &testWS{t: t, dir: dir, state: filepath.Join(dir, "state.json"), env: map[string]string{"STEP_AGENT_CMD": agentBinary(t)}}
	if stateJSON != "" {
		w.write(stateJSON)
	}
	return w
}

// agentBinary is the fake agent TestMain built.
func agentBinary(*testing.T) string { return fakeAgentPath }

// testBinary is this test binary, which TestMain turns into helpers by environment.
func testBinary(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func (w *testWS) write(js string) {
	w.t.Helper()
	if err := os.WriteFile(w.state, []byte(js), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

func (w *testWS) chain() *Chain {
	w.t.Helper()
	rt, err := NewRuntime(w.state, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	rt.Getenv = func(k string) string { return w.env[k] }
	rt.Environ = os.Environ()
	rt.Grace = 200 * time.Millisecond
	rt.PipeGrace = 200 * time.Millisecond
	w.t.Cleanup(func() { rt.Close() })
	return &Chain{Runtime: rt}
}

func (w *testWS) check() error { return w.chain().Check(context.Background()) }

func (w *testWS) read() *planspec.State {
	w.t.Helper()
	st, err := (&store.StateFile{Path: w.state}).Read()
	if err != nil {
		w.t.Fatal(err)
	}
	return st
}

func (w *testWS) path(rel string) string { return filepath.Join(w.dir, rel) }

// plan is a state with one step per instruction, ids s1, s2, …
func plan(extraTop string, steps ...string) string {
	var specs, queue []string
	for i, s := range steps {
		id := fmt.Sprintf("s%d", i+1)
		specs = append(specs, fmt.Sprintf(`%q:{"title":"T%d",%s}`, id, i+1, s))
		queue = append(queue, fmt.Sprintf("%q", id))
	}
	top := fmt.Sprintf(`{"plan":{"steps":{%s}},"stepQueue":[%s],"currentStep":0,"stepRuns":{},"stepDelayMinutes":0,"blockers":[],"status":"IN_PROGRESS"`,
		strings.Join(specs, ","), strings.Join(queue, ","))
	if extraTop != "" {
		top += "," + extraTop
	}
	return top + "}"
}

func TestCheck_RunsTheWholeChain(t *testing.T) {
	w := newTestWS(t, plan("",
		`"instruction":"write:out/a.md","requiredOutputs":["out/a.md"]`,
		`"instruction":"out:hello write:b.txt","requiredOutputs":["b.txt","out"]`,
	))
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	st := w.read()
	if st.Status != "DONE" || st.CurrentStep != 2 {
		t.Fatalf("status %s cursor %d, want DONE 2", st.Status, st.CurrentStep)
	}
	for _, id := range []string{"s1", "s2"} {
		if r := st.Run(id); r.Status != "DONE" || r.Tries != 1 || r.Error != nil {
			t.Errorf("%s = %+v", id, r)
		}
	}
	if got := st.Run("s2").Stdout; got == nil || *got != "hello\n" {
		t.Errorf("stdout = %v, want hello", got)
	}
	if st.LastHeartbeatIso == "" {
		t.Error("lastHeartbeatIso not set")
	}
	if _, err := planspec.ParseISO(st.Run("s1").LastRunIso); err != nil || len(st.Run("s1").LastRunIso) != len("2026-02-10T21:30:31.123456+00:00") {
		t.Errorf("lastRunIso %q not in the original's format", st.Run("s1").LastRunIso)
	}
	log, err := os.ReadFile(w.path(".stepseq/logs/s2/1.log"))
	if err != nil || !bytes.Contains(log, []byte("hello")) {
		t.Errorf("log = %q, %v", log, err)
	}
}

// The contract with real processes: an agent that keeps failing spends its
// tries in one check and leaves the original's end state. What later checks
// and a reset do is the core's (testdata/scenarios/blocked_after_retries.txt).
func TestCheck_FailureRetriesThenBlocks(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"err:broken exit:3"`))
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	st := w.read()
	r := st.Run("s1")
	if r.Status != "FAILED" || r.Tries != 3 || r.Error == nil || *r.Error != "broken\n" {
		t.Fatalf("run = %+v", r)
	}
	if strings.Join(st.Blockers, "|") != "s1: max retries (3) exceeded" {
		t.Fatalf("blockers = %q", st.Blockers)
	}
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	if st := w.read(); st.Run("s1").Tries != 3 || len(st.Blockers) != 1 {
		t.Errorf("after another check: tries %d blockers %q", st.Run("s1").Tries, st.Blockers)
	}
}

func TestCheck_RetryGetsTheTroubleshootPrompt(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"failfirst:marker argsfile:args.txt write:done.txt","requiredOutputs":["done.txt"]`))
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	args, _ := os.ReadFile(w.path("args.txt"))
	lines := strings.Split(string(args), "\n")
	want := "Step s1 failed (tries: 1). Previous run ended with: first try fails. Please troubleshoot and retry: failfirst:marker argsfile:args.txt write:done.txt"
	if lines[len(lines)-1] != want {
		t.Errorf("prompt = %q\nwant     %q", lines[len(lines)-1], want)
	}
	if r := w.read().Run("s1"); r.Status != "DONE" || r.Tries != 2 {
		t.Errorf("run = %+v", r)
	}
}

func TestCheck_ErrorText(t *testing.T) {
	long := strings.Repeat("é", 600)
	tests := []struct {
		name, instruction, want string
	}{
		{"missing outputs are listed", `"instruction":"exit:0","requiredOutputs":["a.md","b/c.md"]`, "Missing required outputs: a.md, b/c.md"},
		{"an escaping output is missing", `"instruction":"exit:0","requiredOutputs":["../outside.txt"]`, "Missing required outputs: ../outside.txt"},
		{"an absolute output is missing", `"instruction":"exit:0","requiredOutputs":["/etc/hostname"]`, "Missing required outputs: /etc/hostname"},
		{"a symlink leading out is missing", `"instruction":"exit:0","requiredOutputs":["link/x"]`, "Missing required outputs: link/x"},
		{"stderr is cut at 500 characters", `"instruction":"err:` + long + ` exit:1"`, strings.Repeat("é", 500)},
		{"no stderr is an empty error", `"instruction":"exit:1"`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newTestWS(t, plan(`"stepseq":{"maxRetries":1}`, tt.instruction))
			outside := t.TempDir()
			_ = os.WriteFile(filepath.Join(outside, "x"), nil, 0o644)
			_ = os.Symlink(outside, w.path("link"))
			_ = os.WriteFile(filepath.Join(filepath.Dir(w.dir), "outside.txt"), nil, 0o644)
			if err := w.check(); err != nil {
				t.Fatal(err)
			}
			r := w.read().Run("s1")
			if r.Status != "FAILED" || r.Error == nil || *r.Error != tt.want {
				t.Errorf("run = %s %v, want FAILED %q", r.Status, deref(r.Error), tt.want)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func TestCheck_AgentArgvAndEnvironment(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"argsfile:args.txt envfile:env.txt  two  spaces"`))
	w.env["STEP_AGENT_CMD"] = agentBinary(t) + "  --flag   value"
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	args, _ := os.ReadFile(w.path("args.txt"))
	want := "--flag\nvalue\nargsfile:args.txt envfile:env.txt  two  spaces"
	if string(args) != want {
		t.Errorf("argv = %q, want %q", args, want)
	}
	env, _ := os.ReadFile(w.path("env.txt"))
	for _, kv := range []string{"STEPSEQ_STEP=s1", "STEPSEQ_TRY=1", "STEPSEQ_WORKSPACE=" + w.dir, "STEPSEQ_STATE=" + w.state} {
		if !strings.Contains(string(env), kv+"\n") {
			t.Errorf("env lacks %s:\n%s", kv, env)
		}
	}
}

func TestCheck_PromptPlaceholder(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"argsfile:args.txt","agent":["`+agentBinary(t)+`","--message","{prompt}","--json"]`))
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	args, _ := os.ReadFile(w.path("args.txt"))
	if want := "--message\nargsfile:args.txt\n--json"; string(args) != want {
		t.Errorf("argv = %q, want %q", args, want)
	}
}

func TestCheck_ConfigErrorsTouchNothing(t *testing.T) {
	tests := []struct{ name, cmd, want string }{
		{"unset", "", "STEP_AGENT_CMD"},
		{"blank", "   ", "STEP_AGENT_CMD"},
		{"a shell", "/bin/bash", "shell"},
		{"sh by base name", "sh", "shell"},
		{"-c", "python3 -c", "shell"},
		{"-e", "node -e", "shell"},
		{"not on PATH", "no-such-agent-xyz", "not found on PATH"},
		{"a relative path, the workspace's", "./agent.sh", "a relative path is resolved against the workspace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newTestWS(t, plan("", `"instruction":"exit:0"`))
			before, _ := os.ReadFile(w.state)
			w.env["STEP_AGENT_CMD"] = tt.cmd
			for _, run := range []func(*Chain) error{
				func(c *Chain) error { return c.Check(context.Background()) },
				func(c *Chain) error { return c.Step(context.Background()) },
			} {
				err := run(w.chain())
				if !errors.Is(err, core.ErrConfig) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err = %v, want a configuration error naming %q", err, tt.want)
				}
				if after, _ := os.ReadFile(w.state); !bytes.Equal(before, after) {
					t.Fatalf("state changed on a configuration error")
				}
			}
		})
	}
}

func TestCheck_InvalidStateChangesNothing(t *testing.T) {
	tests := []struct{ name, js, want string }{
		{"not JSON", `{"plan":`, "not valid JSON"},
		{"NaN", `{"plan":{"steps":{}},"stepQueue":[],"stepDelayMinutes":NaN}`, "NaN"},
		{"tries a string", `{"plan":{"steps":{"a":{"title":"A","instruction":"x"}}},"stepQueue":["a"],"stepRuns":{"a":{"status":"FAILED","tries":"2"}}}`, "stepRuns.a.tries"},
		{"stepQueue not a list", `{"plan":{"steps":{}},"stepQueue":"a"}`, "stepQueue"},
		{"negative currentStep", `{"plan":{"steps":{}},"stepQueue":[],"currentStep":-1}`, "currentStep"},
		{"queued id missing", `{"plan":{"steps":{}},"stepQueue":["ghost"]}`, `"ghost"`},
		{"unknown status", `{"plan":{"steps":{"a":{"title":"A","instruction":"x"}}},"stepQueue":["a"],"stepRuns":{"a":{"status":"done"}}}`, "PENDING, IN_PROGRESS, DONE or FAILED"},
		{"top level a list", `[1,2]`, "object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newTestWS(t, tt.js)
			err := w.check()
			if !errors.Is(err, planspec.ErrInvalidState) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), w.state) {
				t.Fatalf("err = %v, want an invalid-state error naming the file and %s", err, tt.want)
			}
			if after, _ := os.ReadFile(w.state); string(after) != tt.js {
				t.Fatalf("state changed: %s", after)
			}
		})
	}
}

func TestCheck_NoStateCreatesNothing(t *testing.T) {
	w := newTestWS(t, "")
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(w.dir)
	if len(entries) != 0 {
		t.Errorf("created %v", entries)
	}
}

func TestCheck_DoneRunsNothing(t *testing.T) {
	js := strings.Replace(plan("", `"instruction":"write:x"`), `"status":"IN_PROGRESS"`, `"status":"DONE"`, 1)
	w := newTestWS(t, js)
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(w.state); string(after) != js {
		t.Error("a DONE state was rewritten")
	}
	if _, err := os.Stat(w.path("x")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("an agent ran on a DONE plan")
	}
}

func TestCheck_KeepsUnknownKeys(t *testing.T) {
	w := newTestWS(t, `{"mine":{"deep":[1,{"x":null}]},"plan":{"v":2,"steps":{"a":{"title":"A","instruction":"exit:0","note":"keep"}}},
		"stepQueue":["a"],"currentStep":0,"stepRuns":{"a":{"status":"PENDING","tries":0,"extra":true}},"status":"IN_PROGRESS"}`)
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(w.state)
	for _, want := range []string{`"mine": {`, `"deep": [`, `"x": null`, `"v": 2`, `"note": "keep"`, `"extra": true`, "\n  \"plan\": {"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("lost %s:\n%s", want, got)
		}
	}
}

func TestCheck_TimeoutKillsTheGroup(t *testing.T) {
	w := newTestWS(t, plan(`"stepseq":{"maxRetries":1}`, `"instruction":"ignoreterm pidfile:pid.txt sleep:60s","timeout":"300ms"`))
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	r := w.read().Run("s1")
	if r.Status != "FAILED" || deref(r.Error) != "Timeout" {
		t.Fatalf("run = %s %q, want FAILED Timeout", r.Status, deref(r.Error))
	}
	pid, _ := os.ReadFile(w.path("pid.txt"))
	if p := atoi(string(pid)); p == 0 || processExists(p) {
		t.Errorf("agent %s still alive after the timeout", pid)
	}
}

func TestCheck_GrandchildHoldingPipes(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"out:parent grandchild:30s"`))
	done := make(chan error, 1)
	go func() { done <- w.check() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(effectWait):
		t.Fatal("check deadlocked on pipes a grandchild holds")
	}
	if r := w.read().Run("s1"); r.Status != "DONE" || deref(r.Stdout) != "parent\n" {
		t.Errorf("run = %s stdout %q", r.Status, deref(r.Stdout))
	}
	// The grandchild was left in the agent's group: it ended with the step.
	for _, e := range w.journalSince("") {
		if pid, ok := e.Detail["pid"].(float64); ok && e.Event == "launch" && proc.GroupAlive(int(pid)) {
			t.Errorf("the agent's group %d outlived its step", int(pid))
		}
	}
}

func TestCheck_TwoConcurrentChecksLaunchOnce(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"out:working pidfile:started waitfor:release write:out","requiredOutputs":["out"]`))
	first := make(chan error, 1)
	go func() { first <- w.check() }()
	waitFor(t, func() bool { _, err := os.Stat(w.path("started")); return err == nil })
	// The heartbeat fires again during the long step.
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.check(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if err := os.WriteFile(w.path("release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	logs, _ := os.ReadDir(w.path(".stepseq/logs/s1"))
	if r := w.read().Run("s1"); r.Tries != 1 || len(logs) != 1 || r.Status != "DONE" {
		t.Errorf("tries %d, logs %d, status %s: want one launch", r.Tries, len(logs), r.Status)
	}
}

func TestStep_RunsTheCurrentStepThenContinues(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"write:a"`, `"instruction":"write:b"`))
	st := w.read()
	st.Run("s1").Status = "DONE" // the runner does not look at the status
	if err := (&store.StateFile{Path: w.state}).Write(st); err != nil {
		t.Fatal(err)
	}
	if err := w.chain().Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	st = w.read()
	if st.Run("s1").Tries != 1 || st.Status != "DONE" {
		t.Errorf("s1 tries %d, status %s", st.Run("s1").Tries, st.Status)
	}
	for _, f := range []string{"a", "b"} {
		if _, err := os.Stat(w.path(f)); err != nil {
			t.Errorf("%s not written: the chain did not continue", f)
		}
	}
}

func TestStep_FailedStepExits1(t *testing.T) {
	w := newTestWS(t, plan(`"stepseq":{"maxRetries":1}`, `"instruction":"exit:1"`))
	if err := w.chain().Step(context.Background()); !errors.Is(err, ErrStepFailed) {
		t.Fatalf("err = %v, want ErrStepFailed", err)
	}
}

func TestCheck_InterruptedStepIsRetriedWithoutSpendingATry(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"exit:0"`))
	st := w.read()
	core.BeginTry(st, "s1", time.Now(), false) // a check that died mid-step wrote this
	if err := (&store.StateFile{Path: w.state}).Write(st); err != nil {
		t.Fatal(err)
	}
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	r := w.read().Run("s1")
	if r.Status != "DONE" || r.Tries != 1 || r.Agent.Interruptions != 1 {
		t.Errorf("run = %s tries %d interruptions %d", r.Status, r.Tries, r.Agent.Interruptions)
	}
}

// A check reads the state, then takes the lock: the stepseq that held it may
// have judged the step and moved on, then died, in between. The check decides
// from the state on disk once it holds the lock, never from the older one, in
// which the finished step would look interrupted and run again.
func TestCheck_StateWrittenBeforeTheLockIsReadAgain(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"count:starts write:a","requiredOutputs":["a"]`, `"instruction":"count:starts write:b"`))
	st := w.read()
	core.BeginTry(st, "s1", time.Now(), false) // the holder launched s1
	if err := (&store.StateFile{Path: w.state}).Write(st); err != nil {
		t.Fatal(err)
	}
	c := w.chain()
	c.beforeLock = func() {
		// The holder saw s1 end, recorded it DONE and the cursor on, and died.
		st := w.read()
		st.Run("s1").Status, st.Run("s1").Phase, st.CurrentStep = planspec.StatusDone, planspec.PhaseDone, 1
		if err := (&store.StateFile{Path: w.state}).Write(st); err != nil {
			t.Error(err)
		}
	}
	if err := c.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	starts, _ := os.ReadFile(w.path("starts"))
	r := w.read().Run("s1")
	if lines := strings.Fields(string(starts)); len(lines) != 4 || lines[0] != "s2" {
		t.Errorf("agents started: %q; want s2's alone", starts)
	}
	if r.Status != "DONE" || r.Tries != 1 || r.Agent.Interruptions != 0 || w.read().Status != "DONE" {
		t.Errorf("s1 %s tries %d interruptions %d, plan %s", r.Status, r.Tries, r.Agent.Interruptions, w.read().Status)
	}
}

// effectWait bounds the tests' waits for an effect of the code: a journal
// record, a state, a condition. A passing test never waits it out, so it is
// generous: on two cores shared with other builds, what takes milliseconds
// alone (a drain of ten thousand triggers under -race) can take a minute.
const effectWait = 5 * time.Minute

// waitFor polls cond until it holds or effectWait passes.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testwait.For(t, effectWait, "the condition", cond)
}

func TestCheck_AwaitOutputs(t *testing.T) {
	// The agent exits at once; its output lands later, as an async agent CLI
	// does. The window is far longer than the test waits: the output is seen
	// when it comes, not found when the window closes (it was, when it came
	// between the look at the agent's exit and the watch on it).
	w := newTestWS(t, plan("", `"instruction":"exit:0","requiredOutputs":["late.txt"],"awaitOutputs":"1h"`))
	done := make(chan error, 1)
	go func() { done <- w.check() }()
	w.waitJournal(`"event":"exit"`)
	if err := os.WriteFile(w.path("late.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(effectWait):
		t.Fatalf("check still waits %s after the awaited output came", effectWait)
	}
	if r := w.read().Run("s1"); r.Status != "DONE" || r.Tries != 1 {
		t.Errorf("run = %s tries %d", r.Status, r.Tries)
	}
}

func TestStep_WaitsItsDelayThenRunsTheStep(t *testing.T) {
	// A retry 0.001 minutes (60 ms) after the last run: step waits, then runs it.
	recent := planspec.FormatISO(time.Now())
	js := strings.Replace(plan("", `"instruction":"write:a"`), `"stepRuns":{}`, `"stepRuns":{"s1":{"status":"DONE","tries":1,"lastRunIso":"`+recent+`"}}`, 1)
	js = strings.Replace(js, `"stepDelayMinutes":0`, `"stepDelayMinutes":0.001`, 1)
	w := newTestWS(t, js)
	if err := w.chain().Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := w.read().Run("s1"); r.Tries != 2 || !w.exists("a") {
		t.Errorf("tries = %d, want the runner to run its DONE step again after the delay", r.Tries)
	}
}

// syncingNotifier records notifications and syncs in order.
type syncingNotifier struct {
	events []string
}

func (n *syncingNotifier) Notify(note core.Notification) {
	if note.Event != "" {
		n.events = append(n.events, note.Event)
		return
	}
	n.events = append(n.events, note.Status)
}
func (n *syncingNotifier) Sync() error {
	n.events = append(n.events, "sync")
	return nil
}

// The notifications of an input are synced once, after its effects: a step's
// end and what follows it, told by the same input, share one sync, and no
// notification is left unsynced when the chain ends.
func TestChain_SyncsNotificationsOncePerInput(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"exit:0"`, `"instruction":"exit:0"`))
	n := &syncingNotifier{}
	c := w.chain()
	c.OpenNotifier = func(*planspec.State) (Notifier, func()) { return n, func() {} }
	if err := c.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A step's end and the next step's start are one input; so are the last
	// step's end and the plan's end.
	if want := []string{"dispatching", "sync", "done", "dispatching", "sync", "done", "plan_done", "sync"}; !slices.Equal(n.events, want) {
		t.Errorf("notifications and syncs %v, want %v", n.events, want)
	}
}
