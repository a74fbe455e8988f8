package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
	"github.com/stepseq/stepseq/watcher"
)

// sidecarRun is a sidecar running in the test process.
type sidecarRun struct {
	*Sidecar
	cancel context.CancelFunc
	done   chan error
}

// startSidecar runs a sidecar on the test workspace until the test ends, once
// it is ready.
func (w *testWS) startSidecar(opt SidecarOptions) *sidecarRun {
	w.t.Helper()
	r := w.runSidecar(opt)
	waitFor(w.t, r.Ready)
	return r
}

// runSidecar runs a sidecar on the test workspace until the test ends, not
// waiting for it to be ready: for a test that holds the loop, maybe before.
func (w *testWS) runSidecar(opt SidecarOptions) *sidecarRun {
	w.t.Helper()
	c := w.chain()
	sc, err := NewSidecar(c.Runtime, opt)
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &sidecarRun{Sidecar: sc, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- sc.Run(ctx) }()
	w.t.Cleanup(func() { r.stop(w.t) })
	return r
}

func (r *sidecarRun) stop(t *testing.T) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("sidecar: %v", err)
		}
	case <-time.After(effectWait):
		t.Fatalf("sidecar did not stop within %s", effectWait)
	}
}

// waitState waits until the state file satisfies cond.
func (w *testWS) waitState(what string, cond func(st *planspec.State) bool) *planspec.State {
	w.t.Helper()
	var last *planspec.State
	deadline := time.Now().Add(effectWait)
	for time.Now().Before(deadline) {
		if st, err := (&store.StateFile{Path: w.state}).Read(); err == nil {
			last = st
			if cond(st) {
				return st
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	var dump []byte
	if last != nil {
		dump = last.Marshal()
	}
	journal, _ := os.ReadFile(w.path(".stepseq/journal.jsonl"))
	w.t.Fatalf("state never got to: %s\nlast state:\n%s\njournal:\n%s", what, dump, journal)
	return nil
}

// journal is the journal's records. The sidecar may be appending as it reads: a
// Last line without its newline is a record still being written, left for the
// next read.
func (w *testWS) journal() []core.Entry {
	w.t.Helper()
	data, err := os.ReadFile(w.path(".stepseq/journal.jsonl"))
	if err != nil {
		w.t.Fatal(err)
	}
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	var out []core.Entry
	for line := range bytes.Lines(data) {
		var e core.Entry
		if err := json.Unmarshal(line, &e); err != nil {
			w.t.Fatalf("journal line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// waitJournal waits for the journal to hold text, and shows it on failure.
func (w *testWS) waitJournal(text string) {
	w.t.Helper()
	deadline := time.Now().Add(effectWait)
	for {
		data, _ := os.ReadFile(w.path(".stepseq/journal.jsonl"))
		if strings.Contains(string(data), text) {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("journal never got %s:\n%s", text, data)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func done(st *planspec.State) bool { return st.Status == planspec.StatusDone }

func (w *testWS) writeFile(rel, content string) {
	w.t.Helper()
	p := w.path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

func (w *testWS) exists(rel string) bool {
	_, err := os.Stat(w.path(rel))
	return err == nil
}

func TestSidecar_AgentWritesStateInPlace(t *testing.T) {
	w := newTestWS(t, "")
	run := w.startSidecar(SidecarOptions{})
	js := plan("", `"instruction":"write:a.txt","requiredOutputs":["a.txt"]`, `"instruction":"write:b.txt"`)
	// An agent writing state.json in place, in two writes with a pause between:
	// the sidecar sees the first half and must not act on it.
	f, err := os.OpenFile(w.state, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	passes := run.Passes()
	if _, err := f.WriteString(js[:len(js)/2]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return run.Passes() > passes }) // it took the half in
	if logCount(w, "s1") != 0 {
		t.Fatal("an agent was launched on half a state file")
	}
	if _, err := f.WriteString(js[len(js)/2:]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	st := w.waitState("DONE", done)
	if st.Run("s1").Tries != 1 || st.Run("s2").Tries != 1 {
		t.Errorf("tries = %d, %d; want one launch each", st.Run("s1").Tries, st.Run("s2").Tries)
	}
	if !w.exists("a.txt") || !w.exists("b.txt") {
		t.Error("outputs missing")
	}
}

func TestSidecar_TornStateIsNeverOverwritten(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"exit:0"`, `"instruction":"exit:0"`))
	w.startSidecar(SidecarOptions{})
	w.waitState("DONE", done)
	broken := `{"plan": {"steps": {`
	w.writeFile("state.json", broken)
	// Wait for the sidecar to give up re-reading it, then check it left it alone.
	w.waitJournal(`"event":"state-invalid"`)
	if got, _ := os.ReadFile(w.state); string(got) != broken {
		t.Fatalf("an invalid state file was overwritten: %s", got)
	}
}

// A plans folder given relative to the working directory, as `stepseq mcp ws`
// gives ws/plans, is that folder: a plan dropped there once the sidecar runs is
// taken (the folder was watched as ws/ws/plans, and nothing ran).
func TestSidecar_RelativePlansDir(t *testing.T) {
	w := newTestWS(t, "")
	t.Chdir(filepath.Dir(w.dir))
	w.startSidecar(SidecarOptions{PlansDir: filepath.Join(filepath.Base(w.dir), "plans")})
	w.writeFile("plans/rel.yaml", "steps:\n  - id: one\n    title: One\n    instruction: write:one.txt\n    requiredOutputs: [one.txt]\n")
	w.waitState("rel DONE", func(st *planspec.State) bool { return st.Settings.Name == "rel" && done(st) })
}

func TestSidecar_PlanDropped(t *testing.T) {
	w := newTestWS(t, "")
	// Both are there when the sidecar starts: they are taken in file-name order.
	// (Dropped one at a time into an idle sidecar, the first dropped runs first.)
	w.writeFile("plans/b-second.yaml", "steps:\n  - id: two\n    title: Two\n    instruction: write:two.txt\n    requiredOutputs: [two.txt]\n")
	w.writeFile("plans/a-first.yaml", "steps:\n  - id: one\n    title: One\n    instruction: write:one.txt waitfor:go\n    requiredOutputs: [one.txt]\n")
	w.startSidecar(SidecarOptions{})
	// The first plan by file name runs; the second waits its turn.
	w.waitState("a-first running", func(st *planspec.State) bool {
		return st.Settings.Name == "a-first" && st.Run("one").Status == planspec.StatusInProgress
	})
	rec, ok := w.chain().WS.ReadPlanRecord("b-second")
	if !ok || rec.Status != core.PlanWaiting {
		t.Errorf("b-second record = %+v, want waiting", rec)
	}
	w.writeFile("go", "")
	st := w.waitState("b-second DONE", func(st *planspec.State) bool { return st.Settings.Name == "b-second" && done(st) })
	if st.Settings.Source != "plans/b-second.yaml" || !strings.HasPrefix(st.Settings.Hash, "sha256:") {
		t.Errorf("settings = %+v", st.Settings)
	}
	history, _ := os.ReadDir(w.path(".stepseq/history"))
	if len(history) != 1 || !strings.Contains(history[0].Name(), "a-first") {
		t.Errorf("history = %v: the finished a-first state must be archived", history)
	}
}

func TestSidecar_InvalidPlanLeavesStateUntouched(t *testing.T) {
	js := plan("", `"instruction":"exit:0"`)
	w := newTestWS(t, js)
	w.startSidecar(SidecarOptions{})
	w.waitState("DONE", done)
	before, _ := os.ReadFile(w.state)
	w.writeFile("plans/broken.yaml", "steps:\n  - id: x\n    titel: X\n    instruction: do\n")
	var rec core.PlanRecord
	waitFor(t, func() bool {
		var ok bool
		rec, ok = w.chain().WS.ReadPlanRecord("broken")
		return ok && rec.Status == core.PlanInvalid
	})
	if !slices.ContainsFunc(rec.Errors, func(e string) bool {
		return strings.HasPrefix(e, "plans/broken.yaml:3:5: ") && strings.Contains(e, `"titel"`)
	}) {
		t.Errorf("errors = %q, want file:line:col naming the key", rec.Errors)
	}
	if after, _ := os.ReadFile(w.state); string(after) != string(before) {
		t.Error("a rejected plan changed state.json")
	}
	// The same file, fixed, is judged again and applied.
	w.writeFile("plans/broken.yaml", "steps:\n  - id: x\n    title: X\n    instruction: write:x.txt\n")
	w.waitState("fixed plan DONE", func(st *planspec.State) bool { return st.Settings.Name == "broken" && done(st) })
}

func TestSidecar_EditingTheActivePlan(t *testing.T) {
	w := newTestWS(t, "")
	w.startSidecar(SidecarOptions{})
	w.writeFile("plans/p.yaml", "steps:\n  - id: a\n    title: A\n    instruction: out:a waitfor:go-a\n  - id: b\n    title: B\n    instruction: write:old.txt\n")
	w.waitState("a running", func(st *planspec.State) bool { return st.Run("a").Status == planspec.StatusInProgress })
	// An invalid edit is reported; the last good plan keeps running.
	w.writeFile("plans/p.yaml", "steps:\n  - id: a\n    title: A\n    instructions: oops\n")
	waitFor(t, func() bool {
		rec, _ := w.chain().WS.ReadPlanRecord("p")
		return rec.Status == core.PlanInvalid
	})
	// A valid edit reaches the steps not started.
	w.writeFile("plans/p.yaml", "steps:\n  - id: a\n    title: A\n    instruction: out:a waitfor:go-a\n  - id: b\n    title: B\n    instruction: write:new.txt\n  - id: c\n    title: C\n    instruction: write:c.txt\n")
	w.waitState("edit applied", func(st *planspec.State) bool { return len(st.StepQueue) == 3 })
	w.writeFile("go-a", "")
	w.waitState("DONE", done)
	if w.exists("old.txt") || !w.exists("new.txt") || !w.exists("c.txt") {
		t.Error("the edit did not reach the steps not started")
	}
}

func TestSidecar_GateOpensOnEverySavePattern(t *testing.T) {
	saves := map[string]func(w *testWS){
		"create": func(w *testWS) { w.writeFile("approved.txt", "yes") },
		"rename into place": func(w *testWS) {
			w.writeFile(".approved.txt.tmp", "yes")
			if err := os.Rename(w.path(".approved.txt.tmp"), w.path("approved.txt")); err != nil {
				w.t.Fatal(err)
			}
		},
		"in a new directory": func(w *testWS) {
			w.writeFile("gate/deep/approved.txt", "yes")
		},
	}
	for name, save := range saves {
		t.Run(name, func(t *testing.T) {
			w := newTestWS(t, "")
			gate := "approved.txt"
			if name == "in a new directory" {
				gate = "gate/deep/approved.txt"
			}
			w.write(plan("", `"instruction":"write:one"`, `"instruction":"write:two","when":"exists(\"`+gate+`\")"`))
			w.startSidecar(SidecarOptions{})
			w.waitState("s1 DONE", func(st *planspec.State) bool { return st.Run("s1").Status == planspec.StatusDone })
			if w.exists("two") {
				t.Fatal("the gated step ran before its gate opened")
			}
			save(w)
			w.waitState("DONE", done)
		})
	}
}

func TestSidecar_AwaitOutputs(t *testing.T) {
	t.Run("outputs appearing in the window", func(t *testing.T) {
		w := newTestWS(t, plan("", `"instruction":"exit:0","requiredOutputs":["late.txt"],"awaitOutputs":"1m"`))
		w.startSidecar(SidecarOptions{})
		w.waitJournal(`"event":"exit"`)
		if st := w.read(); st.Run("s1").Status != planspec.StatusInProgress {
			t.Fatalf("status = %s before the output appeared, want IN_PROGRESS", st.Run("s1").Status)
		}
		w.writeFile("late.txt", "done")
		st := w.waitState("DONE", done)
		if st.Run("s1").Tries != 1 {
			t.Errorf("tries = %d", st.Run("s1").Tries)
		}
	})
	t.Run("the window passing", func(t *testing.T) {
		w := newTestWS(t, plan(`"stepseq":{"maxRetries":1}`, `"instruction":"exit:0","requiredOutputs":["never.txt"],"awaitOutputs":"200ms"`))
		w.startSidecar(SidecarOptions{})
		st := w.waitState("FAILED", func(st *planspec.State) bool { return st.Run("s1").Status == planspec.StatusFailed })
		if deref(st.Run("s1").Error) != "Missing required outputs: never.txt" {
			t.Errorf("error = %q", deref(st.Run("s1").Error))
		}
	})
}

func TestSidecar_Triggers(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"out:a","on":["notes/**/*.md"]`, `"instruction":"out:b write:notes/by-agent.md"`))
	w.startSidecar(SidecarOptions{})
	w.waitState("DONE", done)
	// The agent's own write to notes/ during its run triggered nothing.
	if st := w.read(); st.Run("s1").Tries != 1 {
		t.Fatalf("s1 tries = %d: an agent's own write re-ran a step", st.Run("s1").Tries)
	}
	// A person's edit under notes/, made later than the agent's own writes, re-runs
	// s1 and the steps after it.
	finished, _ := planspec.ParseISO(w.read().Run("s2").LastRunIso)
	waitFor(t, func() bool { return time.Since(finished) > 5*core.MtimeSlack })
	w.writeFile("notes/deep/idea.md", "x")
	w.waitState("re-run done", func(st *planspec.State) bool {
		return done(st) && st.Run("s1").Agent != nil && st.Run("s2").Agent != nil && logCount(w, "s1") == 2 && logCount(w, "s2") == 2
	})
	// stepseq trigger with a live sidecar: queued and run.
	msg, err := Commands{RT: w.chain().Runtime}.Trigger(context.Background(), "s2", "trigger")
	if err != nil || !strings.Contains(msg, "sidecar") {
		t.Fatalf("trigger: %q %v", msg, err)
	}
	w.waitState("triggered re-run done", func(st *planspec.State) bool { return done(st) && logCount(w, "s2") == 3 })
	if logCount(w, "s1") != 2 {
		t.Errorf("a trigger of s2 re-ran s1")
	}
}

// logCount counts the agents launched for step, from the journal.
func logCount(w *testWS, step string) int {
	data, _ := os.ReadFile(w.path(".stepseq/journal.jsonl"))
	return strings.Count(string(data), `"event":"launch","step":"`+step+`"`)
}

func TestSidecar_CheckHandsOff(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"out:x waitfor:go"`))
	w.startSidecar(SidecarOptions{})
	w.waitState("s1 running", func(st *planspec.State) bool { return st.Run("s1").Status == planspec.StatusInProgress })
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	w.writeFile("go", "")
	st := w.waitState("DONE", done)
	if st.Run("s1").Tries != 1 || logCount(w, "s1") != 1 {
		t.Errorf("a check with a live sidecar launched a second agent")
	}
}

func TestSidecar_OnePerWorkspace(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"exit:0"`))
	w.startSidecar(SidecarOptions{})
	_, err := NewSidecar(w.chain().Runtime, SidecarOptions{})
	if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), "watch") {
		t.Fatalf("err = %v, want ErrLocked naming the holder", err)
	}
}

func TestSidecar_ShutdownInterruptsAndRestartResumes(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"failfirst:first pidfile:pid waitfor:never","requiredOutputs":["first"]`))
	// First try: the agent fails at once ("first try fails"); the second blocks.
	run := w.startSidecar(SidecarOptions{})
	w.waitState("try 2 running", func(st *planspec.State) bool {
		return st.Run("s1").Tries == 2 && st.Run("s1").Status == planspec.StatusInProgress
	})
	pid := w.waitPID("pid")
	run.stop(t)
	if processExists(pid) {
		t.Fatalf("agent %d survived the shutdown", pid)
	}
	if st := w.read(); st.Run("s1").Status != planspec.StatusInProgress {
		t.Fatalf("after shutdown status = %s, want IN_PROGRESS (interrupted)", st.Run("s1").Status)
	}
	// Restarted, the interrupted step is retried without spending a try.
	_ = os.Remove(w.path("pid"))
	w.writeFile("never", "")
	w.startSidecar(SidecarOptions{})
	st := w.waitState("DONE", done)
	if r := st.Run("s1"); r.Tries != 2 || r.Agent.Interruptions != 1 {
		t.Errorf("tries %d interruptions %d, want 2 and 1", r.Tries, r.Agent.Interruptions)
	}
}

// waitPID waits for an agent to have written its pid to rel, whole.
func (w *testWS) waitPID(rel string) int {
	w.t.Helper()
	pid := 0
	waitFor(w.t, func() bool {
		data, err := os.ReadFile(w.path(rel))
		pid = atoi(string(data))
		return err == nil && pid > 0
	})
	// An agent a killed sidecar left waiting ends with the test, should the
	// test fail before it lets it go; known by its start time, so that a
	// process that took its pid since is spared.
	if ticks, err := proc.StartTicks(pid); err == nil {
		w.t.Cleanup(func() {
			if proc.Alive(pid, ticks) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		})
	}
	return pid
}

func TestSidecar_JournalIsSelfDescribing(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"exit:0"`))
	w.startSidecar(SidecarOptions{})
	w.waitState("DONE", done)
	seen := map[string]bool{}
	for _, e := range w.journal() {
		if e.Time == "" || e.Event == "" {
			t.Fatalf("journal record without its time or event: %+v", e)
		}
		seen[e.Event] = true
	}
	for _, ev := range []string{"start", "decide", "launch", "exit", "verdict", "write"} {
		if !seen[ev] {
			t.Errorf("journal lacks %q events", ev)
		}
	}
}

func TestSidecar_RestartNeverAppliesTheSameContentTwice(t *testing.T) {
	w := newTestWS(t, "")
	run := w.startSidecar(SidecarOptions{})
	w.writeFile("plans/once.yaml", "steps:\n  - id: a\n    title: A\n    instruction: out:ran\n")
	w.waitState("DONE", done)
	waitFor(t, func() bool {
		rec, _ := w.chain().WS.ReadPlanRecord("once")
		return rec.Status == core.PlanFinished
	})
	run.stop(t)
	w.startSidecar(SidecarOptions{})
	rec, _ := w.chain().WS.ReadPlanRecord("once")
	if rec.Status != core.PlanFinished || logCount(w, "a") != 1 {
		t.Fatalf("after a restart: record %s, launches %d; want finished and 1", rec.Status, logCount(w, "a"))
	}
	// The same file changed after its plan finished is a new run.
	w.writeFile("plans/once.yaml", "steps:\n  - id: a\n    title: A\n    instruction: out:again\n")
	w.waitState("second run DONE", func(st *planspec.State) bool { return done(st) && logCount(w, "a") == 2 })
	if history, _ := os.ReadDir(w.path(".stepseq/history")); len(history) != 1 {
		t.Errorf("history = %d entries, want the first run archived", len(history))
	}
}

// A plan copied in (an empty file first, then its content) is judged once its
// writer is done: no rejection is said for the empty file. The settle is longer
// than the test can take between its two writes (the default's 200 ms was once
// passed there at load 32 on 2 cores, and the empty file judged).
func TestSidecar_PlanJudgedOnceWritten(t *testing.T) {
	w := newTestWS(t, "")
	run := w.startSidecar(SidecarOptions{PlanSettle: effectWait})
	passes := run.Passes()
	w.writeFile("plans/copied.yaml", "")
	waitFor(t, func() bool { return run.Passes() > passes }) // the sidecar saw the empty file
	w.writeFile("plans/copied.yaml", "steps:\n  - id: one\n    title: One\n    instruction: write:one.txt\n    requiredOutputs: [one.txt]\n")
	w.waitState("copied DONE", func(st *planspec.State) bool { return st.Settings.Name == "copied" && done(st) })
	if j, _ := os.ReadFile(w.path(".stepseq/journal.jsonl")); strings.Contains(string(j), `"reason":"rejected"`) {
		t.Errorf("a rejection was journaled for a file still being written:\n%s", j)
	}
	if rec, _ := w.chain().WS.ReadPlanRecord("copied"); rec.Status != core.PlanFinished && rec.Status != core.PlanActive {
		t.Errorf("record = %+v", rec)
	}
}

// TestSidecar_WatchFollowsSteps: each step's report folder is watched while the
// step runs and until the next try ends (a late report is judged), through
// deltas the journal names, and once the plan is done the watcher holds what a
// fresh watcher on the plan's set and the last step's folder holds.
func TestSidecar_WatchFollowsSteps(t *testing.T) {
	// s1's agent waits for its output, which the test writes: the step ends once,
	// after the file is there, however slowly the test gets to write it.
	w := newTestWS(t, plan("", `"instruction":"waitfor:out/a.txt","requiredOutputs":["out/a.txt"]`, `"instruction":"write:out/b.txt"`, `"instruction":"exit:0"`))
	run := w.startSidecar(SidecarOptions{})
	w.writeFile("out/a.txt", "a")
	w.waitState("DONE", done)
	last := store.ReportsRel("s2")
	var entries []core.Entry
	waitFor(t, func() bool {
		entries = nil
		for _, e := range w.journal() {
			if e.Event == "watch" {
				entries = append(entries, e)
			}
		}
		n := len(entries)
		return n > 0 && slices.Contains(listOf(entries[n-1].Detail["removed"]), last)
	})
	if _, whole := entries[0].Detail["paths"]; !whole {
		t.Errorf("the first watch entry is not the whole set: %v", entries[0].Detail)
	}
	var added, removed []string
	for _, e := range entries[1:] {
		added = append(added, listOf(e.Detail["added"])...)
		removed = append(removed, listOf(e.Detail["removed"])...)
	}
	if dir := store.ReportsRel("s2"); !slices.Contains(added, dir) || !slices.Contains(removed, dir) {
		t.Errorf("%s: added %v, removed %v; want it in both", dir, added, removed)
	}
	if dir := store.ReportsRel("s3"); !slices.Contains(added, dir) || slices.Contains(removed, dir) {
		t.Errorf("%s: added %v, removed %v; want it added and kept: its try ended last", dir, added, removed)
	}
	st, err := (&store.StateFile{Path: w.state}).Read()
	if err != nil {
		t.Fatal(err)
	}
	conds, err := run.main.d.rt.Conditions(st)
	if err != nil {
		t.Fatal(err)
	}
	paths, trees := WatchSet(run.main.d.rt.WS, filepath.Join(w.dir, "plans"), st, conds)
	paths = append(paths, store.ReportsRel("s3"))
	fresh, err := watcher.New(watcher.Config{Root: w.dir, Paths: paths, Trees: trees})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if got, want := run.w.Stats().Watches, fresh.Stats().Watches; got != want {
		t.Errorf("after the plan the sidecar holds %d watches; a fresh watcher on its set holds %d", got, want)
	}
}

// listOf reads a journal detail's list of strings.
func listOf(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// TestSidecar_ReportFileJudgedWhole: a report file is judged on what its writer
// meant, not on what a read caught midway: an empty file just made waits for its
// content, and a file that ends up over the cap is refused as over the cap, not
// as an empty report.
func TestSidecar_ReportFileJudgedWhole(t *testing.T) {
	w := newTestWS(t, "")
	gate := w.path("go.txt")
	w.write(plan("", `"instruction":"waitfor:`+gate+`"`))
	w.startSidecar(SidecarOptions{})
	w.waitState("s1 running", func(st *planspec.State) bool { return st.Run("s1").Status == planspec.StatusInProgress })
	dir := store.Workspace{Dir: w.dir}.ReportsDir("s1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	big, err := os.Create(filepath.Join(dir, "1-big.yaml")) // made, not yet written
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	// A whole report dropped after it: once it is taken, the folder was read with
	// the empty file in it.
	ok := filepath.Join(dir, "1-ok.yaml")
	if err := os.WriteFile(ok+".tmp", []byte("status: accepted\nsummary: s\nevidence: e\nrisk: none\nnext: n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(ok+".tmp", ok); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, err := os.Stat(ok); return errors.Is(err, os.ErrNotExist) })
	if _, err := os.Stat(big.Name() + ".why"); err == nil {
		why, _ := os.ReadFile(big.Name() + ".why")
		t.Fatalf("an empty file just made was judged: %s", why)
	}
	// It becomes 1 MiB: the size is set in one call, so every read sees it whole.
	if err := big.Truncate(1 << 20); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, err := os.Stat(big.Name() + ".rejected"); return err == nil }) // after its .why
	why, _ := os.ReadFile(big.Name() + ".why")
	if !strings.Contains(string(why), "over the 64 KiB cap for a report") {
		t.Errorf("why: %s, want the cap", why)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w.waitState("s1 done", func(st *planspec.State) bool { return st.Run("s1").Status == planspec.StatusDone })
}

// Removing state.json under a live sidecar ends its run: the running agent is
// stopped, the run is kept in the history, and the plan file still in plans/ is
// applied again as a new run. A finished plan's state removed runs nothing again.
func TestSidecar_StateRemovedRunsThePlanAgainAsNew(t *testing.T) {
	w := newTestWS(t, "")
	w.writeFile("plans/p.yaml", "steps:\n  - id: a\n    title: A\n    instruction: count:a.count waitfor:go-a\n  - id: b\n    title: B\n    instruction: write:b.txt\n")
	w.startSidecar(SidecarOptions{})
	w.waitState("a running", func(st *planspec.State) bool { return st.Run("a").Status == planspec.StatusInProgress })
	// The agent's line, not the file: the agent opens the file, then writes,
	// and stopped between the two it leaves the file empty.
	lines := func() int { data, _ := os.ReadFile(w.path("a.count")); return strings.Count(string(data), "\n") }
	waitFor(t, func() bool { return lines() == 1 })
	if err := os.Remove(w.state); err != nil {
		t.Fatal(err)
	}
	w.waitJournal(`"event":"state-removed"`)
	// The plan runs again: a second agent for a, try 1 of a new run.
	waitFor(t, func() bool { return lines() == 2 })
	st := w.waitState("a running again", func(st *planspec.State) bool { return st.Run("a").Status == planspec.StatusInProgress })
	if r := st.Run("a"); r.Tries != 1 || st.Settings.Source != "plans/p.yaml" {
		t.Errorf("a: tries %d, source %q; want try 1 of a new run of plans/p.yaml", r.Tries, st.Settings.Source)
	}
	if rec, _ := w.chain().WS.ReadPlanRecord("p"); rec.Status != core.PlanActive {
		t.Errorf("record %s, want active", rec.Status)
	}
	history, _ := os.ReadDir(w.path(".stepseq/history"))
	if len(history) != 1 || !strings.Contains(history[0].Name(), "-p.json") {
		t.Errorf("history = %v, want the removed run kept", history)
	}
	w.writeFile("go-a", "")
	w.waitState("DONE", done)

	// Removed once the plan is DONE: the run is kept, the plan does not run again.
	if err := os.Remove(w.state); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { h, _ := os.ReadDir(w.path(".stepseq/history")); return len(h) == 2 })
	if rec, _ := w.chain().WS.ReadPlanRecord("p"); rec.Status != core.PlanFinished {
		t.Errorf("record %s after its DONE state was removed, want finished", rec.Status)
	}
	if w.exists("state.json") {
		t.Error("a finished plan ran again when its state was removed")
	}
}

// With no sidecar, a plan whose state.json was removed is listed queued, not
// active, and the next sidecar applies it again as new.
func TestListPlans_StateRemovedIsQueued(t *testing.T) {
	w := newTestWS(t, "")
	w.writeFile("plans/p.yaml", "steps:\n  - id: a\n    title: A\n    instruction: waitfor:go-a\n")
	run := w.startSidecar(SidecarOptions{})
	w.waitState("a running", func(st *planspec.State) bool { return st.Run("a").Status == planspec.StatusInProgress })
	run.stop(t)
	ws := w.chain().WS
	list := func() string {
		l, err := ListPlans(ws, w.path("plans"), nil)
		if err != nil || len(l) != 1 {
			t.Fatalf("list %+v, %v", l, err)
		}
		return l[0].Status
	}
	if got := list(); got != PlanActive {
		t.Fatalf("status %s with its state in place, want active", got)
	}
	if err := os.Remove(w.state); err != nil {
		t.Fatal(err)
	}
	if got := list(); got != PlanQueued {
		t.Errorf("status %s once its state.json was removed, want queued", got)
	}
	w.startSidecar(SidecarOptions{})
	st := w.waitState("applied again", func(st *planspec.State) bool { return st.Run("a").Status == planspec.StatusInProgress })
	if st.Settings.Source != "plans/p.yaml" || st.Run("a").Tries != 1 {
		t.Errorf("source %q tries %d, want try 1 of plans/p.yaml", st.Settings.Source, st.Run("a").Tries)
	}
	if got := list(); got != PlanActive {
		t.Errorf("status %s once applied again, want active", got)
	}
}

// An on: re-run is a new run of the step, tries from 1 again, and its output goes
// to a log of its own: the earlier run's log is kept beside it, set aside.
func TestSidecar_OnRerunHasItsOwnLog(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"out:ran","on":["notes/**/*.md"]`))
	w.startSidecar(SidecarOptions{})
	w.waitState("DONE", done)
	waitFor(t, func() bool { return logCount(w, "s1") == 1 })
	// A person's edit, dated after the agent's run (its own writes trigger
	// nothing): made aside, then moved in.
	w.writeFile("aside.md", "edit")
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(w.path("aside.md"), later, later); err != nil {
		t.Fatal(err)
	}
	w.writeFile("notes/sub/.keep", "")
	if err := os.Rename(w.path("aside.md"), w.path("notes/sub/a.md")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return logCount(w, "s1") == 2 })
	st := w.waitState("DONE again", done)
	if r := st.Run("s1"); r.Tries != 1 {
		t.Errorf("tries %d after the re-run, want 1: a re-run is a new run", r.Tries)
	}
	ws := w.chain().WS
	waitFor(t, func() bool {
		data, _ := os.ReadFile(ws.LogPath("s1", 1))
		return strings.Contains(string(data), "exit")
	})
	data, _ := os.ReadFile(ws.LogPath("s1", 1))
	if n := strings.Count(string(data), "\nran\n"); n != 1 {
		t.Errorf("the re-run's log holds the output of %d runs, want 1:\n%s", n, data)
	}
	earlier, _ := filepath.Glob(filepath.Join(filepath.Dir(ws.LogPath("s1", 1)), "earlier-*-1.log"))
	if len(earlier) != 1 {
		t.Fatalf("earlier logs %v, want the first run's try 1 kept", earlier)
	}
	if old, _ := os.ReadFile(earlier[0]); strings.Count(string(old), "\nran\n") != 1 {
		t.Errorf("the earlier log:\n%s", old)
	}
}

// TestSidecar_NotReadyWhileWatchLimited: while the watcher says a watch limit
// leaves part of the workspace polled, the sidecar is not ready (/readyz fails),
// and it is again once every watch is armed.
func TestSidecar_NotReadyWhileWatchLimited(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"write:a"`))
	run := w.startSidecar(SidecarOptions{})
	limit := run.wcfg.OnLimit
	limit(fmt.Errorf("watch /ws/src: %w", watcher.ErrWatchLimit))
	if run.Ready() {
		t.Error("ready with a watch limit hit")
	}
	limit(nil)
	if !run.Ready() {
		t.Error("not ready once every watch is armed again")
	}
}

// A report file dropped for a step whose try is over is judged: renamed
// .rejected with a .why beside it saying the try is over, so that its writer
// hears. The step's folder used to leave the watch set with the step, and the
// file lay there unread.
func TestSidecar_ReportAfterTheTryIsJudged(t *testing.T) {
	t.Parallel()
	w := newTestWS(t, plan("", `"instruction":"exit:0"`, `"instruction":"waitfor:release"`))
	w.startSidecar(SidecarOptions{})
	w.waitState("s2 running", func(st *planspec.State) bool { return st.Run("s2").Status == planspec.StatusInProgress })
	late := func(step string) {
		t.Helper()
		dir := w.path(store.ReportsRel(step))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, "late.yaml")
		rep := "status: milestone\nsummary: late\nevidence: wrote it after the exit\nrisk: none\nnext: none\n"
		if err := os.WriteFile(file, []byte(rep), 0o644); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { _, err := os.Stat(file + ".rejected"); return err == nil })
		why, err := os.ReadFile(file + ".why")
		if err != nil || !strings.Contains(string(why), "stale") {
			t.Errorf("%s.why = %q, %v; want it to say the report is stale", file, why, err)
		}
	}
	late("s1") // s1 is done, s2 runs
	if err := os.WriteFile(w.path("release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w.waitState("done", done)
	late("s2") // the plan is done
}
