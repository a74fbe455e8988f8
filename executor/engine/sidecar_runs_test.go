package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// waitRun waits until run name's state file satisfies cond.
func (w *testWS) waitRun(name, what string, cond func(st *planspec.State) bool) *planspec.State {
	w.t.Helper()
	path := store.RunStatePath(w.dir, name)
	var last error
	deadline := time.Now().Add(effectWait)
	for {
		st, err := (&store.StateFile{Path: path}).Read()
		if err == nil && cond(st) {
			return st
		}
		last = err
		if time.Now().After(deadline) {
			data, _ := os.ReadFile(path)
			w.t.Fatalf("run %s: %s: not within %s (%v)\n%s", name, what, effectWait, last, data)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// writeRun writes run name's state file as an agent would, by hand.
func (w *testWS) writeRun(name, js string) {
	w.t.Helper()
	w.writeFile(filepath.Base(store.RunStatePath(w.dir, name)), js)
}

// waitPIDs waits until n agents wrote their pid under dir (made here, before
// they run), and reads them by file name.
func (w *testWS) waitPIDs(dir string, n int) map[string]int {
	w.t.Helper()
	out := map[string]int{}
	if err := os.MkdirAll(w.path(dir), 0o755); err != nil {
		w.t.Fatal(err)
	}
	waitFor(w.t, func() bool {
		entries, _ := os.ReadDir(w.path(dir))
		for _, e := range entries {
			if data, err := os.ReadFile(filepath.Join(w.path(dir), e.Name())); err == nil && len(data) > 0 {
				out[e.Name()] = atoi(string(data))
			}
		}
		return len(out) >= n
	})
	return out
}

// TestSidecar_RunsSideBySide: one sidecar drives state.json and the runs beside
// it — one written before it started, one after, one started by StartRun —
// with their agents alive at the same time; a malformed run file beside them
// stays its own, named with its line; each run's logs and journal are its own.
func TestSidecar_RunsSideBySide(t *testing.T) {
	t.Parallel()
	step := func(name string) string {
		return plan(`"stepseq":{"name":"p-`+name+`"}`,
			`"instruction":"stamp:times/`+name+`.start pidfile:pids/`+name+` out:log-of-`+name+` waitfor:go stamp:times/`+name+`.end write:out/`+name+`","requiredOutputs":["out/`+name+`"]`,
			`"instruction":"out:second-of-`+name+`"`)
	}
	w := newTestWS(t, step("main"))
	w.writeRun("early", step("early"))
	w.writeRun("bad", "{\n  \"stepQueue\": [\"x\"],\n  oops\n}\n")
	if err := os.MkdirAll(w.path("pids"), 0o755); err != nil {
		t.Fatal(err)
	}
	w.startSidecar(SidecarOptions{})
	w.writeRun("late", step("late"))
	rt := w.chain().Runtime
	pf := testRunPlan(t, w.dir, "started", "name: started\nsteps:\n  - id: s1\n    title: S1\n    instruction: stamp:times/started.start pidfile:pids/started out:log-of-started waitfor:go stamp:times/started.end write:out/started\n    requiredOutputs: [out/started]\n")
	if info, err := rt.StartRun(RunStart{Plan: pf}); err != nil || info.Name != "started" {
		t.Fatalf("StartRun: %+v %v", info, err)
	}

	// Four agents at once (the default --max-agents), one per run: each alive
	// while the others are.
	pids := w.waitPIDs("pids", 4)
	for name, pid := range pids {
		if !processExists(pid) {
			t.Fatalf("agent of %s (pid %d) is gone before the release: the runs did not overlap", name, pid)
		}
	}
	w.writeFile("go", "")
	w.waitState("main DONE", done)
	for _, name := range []string{"early", "late", "started"} {
		w.waitRun(name, "DONE", done)
		if data, _ := os.ReadFile(w.path(".stepseq/runs/" + name + "/logs/s1/1.log")); !strings.Contains(string(data), "log-of-"+name) {
			t.Errorf("run %s: its log is not under .stepseq/runs/%s/logs", name, name)
		}
	}
	// Their launches overlapped in time: every start came before every end.
	var lastStart, firstEnd int64
	for _, name := range []string{"main", "early", "late", "started"} {
		s, _ := os.ReadFile(w.path("times/" + name + ".start"))
		e, _ := os.ReadFile(w.path("times/" + name + ".end"))
		start, end := atoi64(string(s)), atoi64(string(e))
		lastStart = max(lastStart, start)
		if firstEnd == 0 || end < firstEnd {
			firstEnd = end
		}
	}
	if lastStart >= firstEnd {
		var b strings.Builder
		for _, name := range []string{"main", "early", "late", "started"} {
			s, _ := os.ReadFile(w.path("times/" + name + ".start"))
			e, _ := os.ReadFile(w.path("times/" + name + ".end"))
			j, _ := os.ReadFile(filepath.Join(w.dir, ".stepseq", "runs", name, "journal.jsonl"))
			fmt.Fprintf(&b, "%s: %s → %s\n%s\n", name, s, e, j)
		}
		t.Errorf("the runs' agents did not overlap: last start %d, first end %d\n%s", lastStart, firstEnd, b.String())
	}
	if w.exists(".stepseq/logs/s1/2.log") {
		t.Error("the workspace's own run ran s1 twice")
	}
	// The malformed file is judged once its writer had time to finish it.
	waitFor(t, func() bool {
		journal, _ := os.ReadFile(w.path(".stepseq/runs/bad/journal.jsonl"))
		return strings.Contains(string(journal), `"event":"state-invalid"`) && strings.Contains(string(journal), "state.bad.json: not valid JSON at line 3")
	})
	runs, err := store.ListRuns(rt.WS)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range runs {
		got = append(got, r.Name+"="+r.Status)
	}
	want := []string{"main=done", "bad=invalid", "early=done", "late=done", "started=done"}
	if !slices.Equal(got, want) {
		t.Errorf("runs %v, want %v", got, want)
	}
}

func atoi64(s string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	return n
}

// TestSidecar_CloseStopsTheRunsAgent: CloseRun beside a live sidecar stops the
// run's agent as SIGTERM stops the sidecar's, archives the run, and leaves the
// other runs running.
func TestSidecar_CloseStopsTheRunsAgent(t *testing.T) {
	t.Parallel()
	w := newTestWS(t, plan("", `"instruction":"pidfile:pids/main waitfor:go"`))
	w.writeRun("a", plan("", `"instruction":"pidfile:pids/a waitfor:never"`))
	if err := os.MkdirAll(w.path("pids"), 0o755); err != nil {
		t.Fatal(err)
	}
	w.startSidecar(SidecarOptions{})
	pids := w.waitPIDs("pids", 2)
	info, err := closeRunFiles(store.Workspace{Dir: w.dir}, "a", time.Second)
	if err != nil || info.Status != store.RunClosed {
		t.Fatalf("CloseRun: %+v, %v", info, err)
	}
	waitFor(t, func() bool { return !processExists(pids["a"]) })
	if w.exists("state.a.json") || !w.exists(".stepseq/runs/a/closed.json") || w.exists(".stepseq/runs/a/close") {
		t.Fatal("the closed run is not archived")
	}
	if !processExists(pids["main"]) {
		t.Fatal("closing run a stopped the workspace's own agent")
	}
	w.writeFile("go", "")
	w.waitState("main DONE", done)
	if again, err := closeRunFiles(store.Workspace{Dir: w.dir}, "a", time.Second); err != nil || again.Status != store.RunClosed {
		t.Fatalf("a closed run closed again: %+v, %v; want the closed run as the answer", again, err)
	}
	// The workspace's own run, closed beside the live sidecar, goes to the history.
	if _, err := closeRunFiles(store.Workspace{Dir: w.dir}, store.MainRun, time.Second); err != nil {
		t.Fatal(err)
	}
	if w.exists("state.json") || w.exists(".stepseq/close") {
		t.Fatal("state.json stays after its close")
	}
	if hist, err := History(w.chain().WS); err != nil || len(hist) != 1 {
		t.Fatalf("history after closing main: %+v, %v", hist, err)
	}
}

// TestSidecar_MaxAgents: six runs, --max-agents 2: never more than two agents
// alive at once (they hold one of two flocks; a third finds none), and the
// others wait their turn and finish.
func TestSidecar_MaxAgents(t *testing.T) {
	t.Parallel()
	w := newTestWS(t, "")
	names := []string{"r1", "r2", "r3", "r4", "r5", "r6"}
	for _, name := range names {
		w.writeRun(name, plan("", `"instruction":"slots:lim/2 sleep:100ms"`))
	}
	w.startSidecar(SidecarOptions{MaxAgents: 2})
	for _, name := range names {
		w.waitRun(name, "DONE", done)
	}
	if data, err := os.ReadFile(w.path("lim/over")); err == nil {
		t.Fatalf("more than 2 agents at once:\n%s", data)
	}
	queued := 0
	for _, name := range names {
		data, _ := os.ReadFile(w.path(".stepseq/runs/" + name + "/journal.jsonl"))
		queued += strings.Count(string(data), `"event":"launch-queued"`)
	}
	if queued < len(names)-2 {
		t.Errorf("%d launches waited for a slot, want at least %d", queued, len(names)-2)
	}
}

// TestSidecar_RunPulledStep: a run's agent: mcp step is dispatched by the
// sidecar as the workspace's own are (no process, no configuration error), and
// a worker's report in the run's report folder finishes it. The worker writes
// as soon as it reads the dispatch: the folder exists and is watched by then.
func TestSidecar_RunPulledStep(t *testing.T) {
	t.Parallel()
	w := newTestWS(t, "")
	w.startSidecar(SidecarOptions{})
	pf := testRunPlan(t, w.dir, "pulled", "name: pulled\nsteps:\n  - id: s1\n    title: S1\n    agent: mcp\n    instruction: do it\n")
	if _, err := w.chain().Runtime.StartRun(RunStart{Plan: pf}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			j, _ := os.ReadFile(w.path(".stepseq/runs/pulled/journal.jsonl"))
			ents, _ := os.ReadDir(w.path(".stepseq/runs/pulled/reports/s1"))
			t.Logf("journal:\n%s\nreports: %v", j, ents)
		}
	}()
	w.waitRun("pulled", "s1 dispatched", func(st *planspec.State) bool {
		return st.Run("s1").Status == planspec.StatusInProgress && st.Run("s1").Tries == 1 && len(st.Blockers) == 0
	})
	if fi, err := os.Stat(w.path(".stepseq/runs/pulled/reports/s1")); err != nil || !fi.IsDir() {
		t.Fatalf("s1 is dispatched in the state before its report folder exists: %v", err)
	}
	w.writeFile(".stepseq/runs/pulled/reports/s1/1-accepted.txt", "status: accepted\nsummary: on it\nevidence: read the step\nrisk: none\nnext: do it\n")
	w.waitRun("pulled", "s1 accepted", func(st *planspec.State) bool { return st.Run("s1").Phase != "dispatching" })
	w.writeFile(".stepseq/runs/pulled/reports/s1/1-done.txt", "status: done\nsummary: done it\nevidence: it is done\nrisk: none\nnext: none\n")
	w.waitRun("pulled", "DONE", done)
}

// TestSidecar_RunTriggerHeldAtStop: a trigger the sidecar took from a run's
// folder while the run's pulled step is offered waits for the step to end; a
// sidecar stopped before then withdraws the try and applies it: the run's
// state is reset and its journal records the trigger.
func TestSidecar_RunTriggerHeldAtStop(t *testing.T) {
	t.Parallel()
	w := newTestWS(t, "")
	sc := w.startSidecar(SidecarOptions{})
	rt := w.chain().Runtime
	pf := testRunPlan(t, w.dir, "held", "name: held\nsteps:\n  - id: s1\n    title: S1\n    agent: mcp\n    instruction: do it\n")
	if _, err := rt.StartRun(RunStart{Plan: pf}); err != nil {
		t.Fatal(err)
	}
	w.waitRun("held", "s1 dispatched", func(st *planspec.State) bool { return st.Run("s1").Status == planspec.StatusInProgress })
	ws := rt.WS.ForRun("held")
	if err := WriteTrigger(ws, core.Trigger{Step: "s1", From: "trigger"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		entries, _ := os.ReadDir(ws.TriggersDir())
		return len(entries) == 0
	})
	sc.stop(t)
	j, _ := os.ReadFile(w.path(".stepseq/runs/held/journal.jsonl"))
	if !strings.Contains(string(j), `"event":"trigger","step":"s1"`) {
		t.Fatalf("the run's journal does not record the trigger taken during the step:\n%s", j)
	}
	if st, err := (&store.StateFile{Path: ws.State}).Read(); err != nil || st.Run("s1").Status != planspec.StatusPending || st.Run("s1").Tries != 0 {
		t.Fatalf("the run's state after the stop: %v, want s1 PENDING with no try", err)
	}
}
