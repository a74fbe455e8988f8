package engine

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// checkProcess runs `stepseq check` on statePath: the test binary as a separate
// process, so that tests can kill -9 it mid-step.
func checkProcess(statePath string) int {
	return helperProcess(statePath, func(rt *Runtime) error {
		rt.Grace = 200 * time.Millisecond
		return (&Chain{Runtime: rt}).Check(context.Background())
	})
}

func (w *testWS) startCheckProcess() *exec.Cmd { return w.startProcess("STEPSEQ_TEST_CHECK") }

func kill9(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
}

// journalCount counts the journal lines holding text.
func journalCount(w *testWS, text string) int {
	data, _ := os.ReadFile(w.path(".stepseq/journal.jsonl"))
	return strings.Count(string(data), text)
}

// Sidecars killed one after the other while one agent runs: each new one finds
// the agent through its try lock, whatever the dead ones recorded, and none
// launches a second agent. The step is then judged by the output the agent left.
func TestSidecar_CrashesInARow(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"count:starts pidfile:agent.pid waitfor:release write:out","requiredOutputs":["out"]`))
	kill9(t, w.startSidecarProcess())
	first := w.startSidecarProcess()
	w.waitState("s1 running", func(st *planspec.State) bool { return st.Run("s1").Status == planspec.StatusInProgress })
	agent := w.waitPID("agent.pid")
	kill9(t, first)
	for i := 1; i <= 3; i++ {
		next := w.startSidecarProcess()
		waitFor(t, func() bool { return journalCount(w, `"action":"running"`) == i })
		kill9(t, next)
		if !processExists(agent) {
			t.Fatal("the agent died with a sidecar")
		}
	}
	w.startSidecarProcess()
	waitFor(t, func() bool { return journalCount(w, `"action":"running"`) == 4 })
	w.writeFile("release", "")
	st := w.waitState("DONE", done)
	// Counted by the agent itself: the journal's launch line of the first
	// sidecar, written once the agent runs, may die with it.
	if n := strings.Count(readFileString(w.path("starts")), "\n"); n != 1 {
		t.Errorf("s1's agent started %d times over four crashes, want 1", n)
	}
	if r := st.Run("s1"); r.Tries != 1 || r.Agent.Interruptions != 0 {
		t.Errorf("s1: %d tries, %d interruptions; want 1 and 0", r.Tries, r.Agent.Interruptions)
	}
}

// `check` killed mid-step, then heartbeats: each later check sees the agent the
// dead one left and launches nothing; once it ended, a check judges it by the
// output it left and does not run it again.
func TestCheck_KilledMidStepThenHeartbeats(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"count:starts pidfile:agent.pid waitfor:release write:out","requiredOutputs":["out"]`, `"instruction":"write:two"`))
	starts := func() int { return strings.Count(readFileString(w.path("starts")), "\n") }
	first := w.startCheckProcess()
	w.waitPID("agent.pid")
	kill9(t, first)
	for range 3 {
		if err := w.check(); err != nil {
			t.Fatal(err)
		}
		if n := starts(); n != 1 {
			t.Fatalf("a heartbeat launched s1 again while its agent ran (%d starts)", n)
		}
	}
	st := w.read()
	ws, started := w.chain().WS, st.Run("s1").Agent.StartedIso
	w.writeFile("release", "")
	// The agent's threads close its descriptors, the lock among them, a moment
	// after its leader shows it ended: the lock says when it is gone.
	waitFor(t, func() bool { return !proc.ProbeTry(ws, "s1", 1, started).Alive })
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	st = w.read()
	if !done(st) || starts() != 1 || st.Run("s1").Tries != 1 {
		data, _ := os.ReadFile(w.path(".stepseq/journal.jsonl"))
		t.Errorf("after the agent ended: done %v, %d starts of s1, %d tries; want DONE, 1, 1\n%s", done(st), starts(), st.Run("s1").Tries, data)
	}
}

func readFileString(path string) string {
	data, _ := os.ReadFile(path)
	return string(data)
}

// inProgress is a state whose one step was marked IN_PROGRESS (try 1) by a
// stepseq that then died, and the try lock record that stepseq made, if any.
func inProgress(t *testing.T, instr string, rec *proc.TryRecord) *testWS {
	t.Helper()
	w := newTestWS(t, plan("", instr))
	st := w.read()
	core.BeginTry(st, "s1", time.Now(), false)
	if err := (&store.StateFile{Path: w.state}).Write(st); err != nil {
		t.Fatal(err)
	}
	if rec != nil {
		rec.Step, rec.Try, rec.Started = "s1", 1, st.Run("s1").Agent.StartedIso
		h, err := proc.TakeTryLock(w.chain().WS, *rec, func(proc.TryRecord) bool { return false })
		if err != nil {
			t.Fatal(err)
		}
		h.Record = *rec
		if rec.Began == 0 {
			h.Record.Began = time.Now().Add(-time.Second).UnixNano()
		}
		_ = h.Save()
		h.Release()
	}
	return w
}

// What an orphan left decides whether it runs again: its recorded exit, a done
// report, or its outputs written since the try began; nothing of the sort, and
// it is relaunched as interrupted, without spending a try.
func TestCheck_OrphanJudgedByWhatItLeft(t *testing.T) {
	cases := []struct {
		name     string
		rec      *proc.TryRecord
		output   string // the required output: "" none, "fresh" written after the record, "stale" before
		report   bool   // a done report of the try is in the state
		launches int
		tries    int
	}{
		{name: "exit 0 recorded, output there", rec: &proc.TryRecord{Exited: true, PID: 1}, output: "stale", tries: 1},
		{name: "exit 3 recorded: a failed try", rec: &proc.TryRecord{Exited: true, Code: 3, PID: 1}, output: "fresh", launches: 1, tries: 2},
		{name: "stopped by its stepseq: an interruption", rec: &proc.TryRecord{Exited: true, Code: 1, Stopped: true, PID: 1}, output: "fresh", launches: 1, tries: 1},
		{name: "exit unknown, fresh output", rec: &proc.TryRecord{PID: 1}, output: "fresh", tries: 1},
		{name: "exit unknown, done report", rec: &proc.TryRecord{PID: 1}, output: "stale", report: true, tries: 1},
		{name: "exit unknown, stale output", rec: &proc.TryRecord{PID: 1}, output: "stale", launches: 1, tries: 1},
		{name: "exit unknown, no output", rec: &proc.TryRecord{PID: 1}, launches: 1, tries: 1},
		{name: "killed before the record: never started", output: "fresh", launches: 1, tries: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := inProgress(t, `"instruction":"write:out","requiredOutputs":["out"]`, c.rec)
			switch c.output {
			case "fresh":
				w.writeFile("out", "x")
			case "stale":
				w.writeFile("out", "x")
				old := time.Now().Add(-time.Hour)
				if err := os.Chtimes(w.path("out"), old, old); err != nil {
					t.Fatal(err)
				}
			}
			if c.report {
				st := w.read()
				run := st.Run("s1")
				run.Reports = append(run.Reports, planspec.ReportRecord{Try: 1, WorkerReport: planspec.WorkerReport{Status: planspec.ReportDone}})
				if err := (&store.StateFile{Path: w.state}).Write(st); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.check(); err != nil {
				t.Fatal(err)
			}
			r := w.read().Run("s1")
			if logCount(w, "s1") != c.launches || r.Status != planspec.StatusDone || r.Tries != c.tries {
				data, _ := os.ReadFile(w.path(".stepseq/journal.jsonl"))
				t.Errorf("%d launches, %s, %d tries; want %d, DONE, %d\n%s", logCount(w, "s1"), r.Status, r.Tries, c.launches, c.tries, data)
			}
		})
	}
}

// The window just after the try's write: an agent forked but not yet recorded
// holds the try lock it inherited, and that alone keeps every later stepseq from
// launching a second one. The test holds the lock as such an agent would.
func TestCheck_UnrecordedAgentHoldsItsLock(t *testing.T) {
	w := inProgress(t, `"instruction":"write:out","requiredOutputs":["out"]`, &proc.TryRecord{})
	f, err := os.Open(proc.TryLockOf(w.chain().WS, "s1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := w.check(); err != nil {
			t.Fatal(err)
		}
		if n := logCount(w, "s1"); n != 0 {
			t.Fatalf("launched s1 while its lock was held (%d launches)", n)
		}
	}
	run := w.startSidecar(SidecarOptions{})
	w.waitJournal(`"action":"running"`)
	if n := logCount(w, "s1"); n != 0 {
		t.Fatalf("the sidecar launched s1 while its lock was held")
	}
	f.Close() // the agent ends, having written nothing
	w.waitState("DONE", done)
	run.stop(t)
	if n := logCount(w, "s1"); n != 1 {
		t.Errorf("s1 launched %d times, want 1 once the lock was free", n)
	}
	if r := w.read().Run("s1"); r.Tries != 1 || r.Agent.Interruptions != 1 {
		t.Errorf("s1: %d tries, %d interruptions; want 1 and 1", r.Tries, r.Agent.Interruptions)
	}
}

// The try lock is held while the agent runs, names its pid, and says how it
// Ended once the driver reaped it.
func TestTryLockFile_RecordsTheAgent(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"pidfile:agent.pid waitfor:release"`))
	run := w.startSidecar(SidecarOptions{})
	w.waitPID("agent.pid")
	st := w.read()
	ws, started := w.chain().WS, st.Run("s1").Agent.StartedIso
	if s := proc.ProbeTry(ws, "s1", 1, started); !s.Alive || !s.Recorded || s.PID == 0 {
		t.Fatalf("while the agent runs: %+v, want alive, recorded, with its pid", s)
	}
	w.writeFile("release", "")
	w.waitState("DONE", done)
	run.stop(t)
	s := proc.ProbeTry(ws, "s1", 1, started)
	if s.Alive || !s.Exited || s.Code != 0 {
		t.Errorf("after the step: %+v, want free, exited 0", s)
	}
}
