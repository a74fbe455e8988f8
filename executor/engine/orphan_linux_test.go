package engine

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// The crashes that leave what a try started without its agent: the built
// stepseq `watch` killed with SIGKILL, and the agent's main process after it.

var python struct {
	sync.Once
	path string
	err  error
}

// pythonPath is the python3 interpreter itself, not a shim that finds it: a
// wrapper agent starts in tens of milliseconds rather than hundreds.
func pythonPath(t testing.TB) string {
	t.Helper()
	python.Do(func() {
		var out []byte
		out, python.err = exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
		python.path = strings.TrimSpace(string(out))
	})
	if python.err != nil || python.path == "" {
		t.Fatalf("python3 runs the wrapper agent: %v", python.err)
	}
	return python.path
}

// wrapperAgent is the agent command of a wrapper (testdata/popenwrapper) that
// runs the fake agent as its worker with subprocess.Popen, which closes the
// try lock's descriptor; setsid starts the worker in a session of its own.
// The wrapper writes its pid to piddir/<step>.
func wrapperAgent(t testing.TB, piddir string, setsid bool) string {
	wrapper, err := filepath.Abs("../testdata/popenwrapper/wrapper.py")
	if err != nil {
		t.Fatal(err)
	}
	// -S: without the site module python starts in a third of the time.
	cmd := fmt.Sprintf("%s -S %s %s --piddir %s", pythonPath(t), wrapper, fakeAgentPath, piddir)
	if setsid {
		cmd += " --setsid"
	}
	return cmd
}

// watchProcess is a `stepseq watch` of the built command on the workspace.
type watchProcess struct {
	cmd    *exec.Cmd
	exited chan error
}

// startWatchProcess starts the built stepseq's `watch` on the workspace with
// agent as STEP_AGENT_CMD, its output in the test's log.
func (w *testWS) startWatchProcess(agent string) *watchProcess {
	w.t.Helper()
	cmd := exec.Command(stepseqBinary(w.t), "watch", "--grace", "300ms", w.dir)
	cmd.Env = append(os.Environ(), "STEP_AGENT_CMD="+agent)
	log, err := os.OpenFile(filepath.Join(w.dir, "..", filepath.Base(w.dir)+".watch.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		w.t.Fatal(err)
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	p := &watchProcess{cmd: cmd, exited: make(chan error, 1)}
	go func() { p.exited <- cmd.Wait() }()
	w.t.Cleanup(func() { p.kill() })
	return p
}

// kill ends the sidecar with SIGKILL and waits for it.
func (p *watchProcess) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	p.exited <- nil // for a second kill, or the test's cleanup
}

// stop ends the sidecar with SIGTERM, gracefully.
func (p *watchProcess) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		if err != nil {
			t.Errorf("stepseq watch: %v", err)
		}
		p.exited <- nil
	case <-time.After(effectWait):
		t.Fatalf("stepseq watch did not stop within %s", effectWait)
	}
}

// killPID kills process pid and waits until it has ended.
func killPID(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %d: %v", pid, err)
	}
	waitFor(t, func() bool { return !processExists(pid) })
}

// waitWaiting waits for the n-th sidecar's decision to wait for an agent from
// before it, and fails at once when the agent's step started again instead
// (a second line in starts).
func (w *testWS) waitWaiting(n int, starts string) {
	w.t.Helper()
	deadline := time.Now().Add(effectWait)
	for {
		data, _ := os.ReadFile(w.path(".stepseq/journal.jsonl"))
		if strings.Count(string(data), `"action":"running"`) >= n {
			return
		}
		if c := lineCount(starts); c > 1 || time.Now().After(deadline) {
			w.t.Fatalf("sidecar %d: the step started %d times, or it never waited for the agent from before it:\n%s", n+1, c, data)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func lineCount(path string) int {
	data, _ := os.ReadFile(path)
	return strings.Count(string(data), "\n")
}

// A wrapper agent's worker, which did not inherit the try lock, outlives the
// sidecar and then the wrapper, both killed with SIGKILL, and a restarted
// sidecar killed in turn: no sidecar launches a second worker beside it (the
// worker's own flock would see it), and the step is judged once, after the
// worker has ended, by the output it left.
func TestWatch_WrapperWorkerOutlivesTwoCrashes(t *testing.T) {
	for _, v := range []struct {
		name   string
		setsid bool
	}{{"in the agent's group", false}, {"in a session of its own", true}} {
		t.Run(v.name, func(t *testing.T) {
			out := t.TempDir()
			twins, starts, ends := filepath.Join(out, "twins"), filepath.Join(out, "starts"), filepath.Join(out, "ends")
			w := newTestWS(t, plan("",
				fmt.Sprintf(`"instruction":"twin:%s count:%s pidfile:worker.pid waitfor:release write:out count:%s","requiredOutputs":["out"]`, twins, starts, ends),
				`"instruction":"write:two"`))
			agent := wrapperAgent(t, out, v.setsid)
			first := w.startWatchProcess(agent)
			worker := w.waitPID("worker.pid")
			wrapper := waitFilePID(t, filepath.Join(out, "s1"))

			first.kill()
			killPID(t, wrapper)
			if !processExists(worker) {
				t.Fatal("the worker died with the wrapper")
			}
			t.Cleanup(func() { _ = syscall.Kill(worker, syscall.SIGKILL) })
			second := w.startWatchProcess(agent)
			w.waitWaiting(1, starts)
			second.kill()
			third := w.startWatchProcess(agent)
			w.waitWaiting(2, starts)

			w.writeFile("release", "")
			st := w.waitState("DONE", done)
			if r := st.Run("s1"); r.Tries != 1 {
				t.Errorf("s1 took %d tries", r.Tries)
			}
			if n := lineCount(starts); n != 1 {
				t.Errorf("s1 started %d times; its worker's output said done", n)
			}
			if data, err := os.ReadFile(filepath.Join(twins, "overlaps")); err == nil {
				t.Errorf("two workers of one step alive at once: %s", data)
			}
			w.waitJournal(`"event":"orphan","step":"s1","try":1,"reason":"judged done by its required outputs`)
			third.stop(t)
		})
	}
}

// waitFilePID waits for a whole pid in the file at path.
func waitFilePID(t *testing.T, path string) int {
	t.Helper()
	pid := 0
	waitFor(t, func() bool {
		data, err := os.ReadFile(path)
		pid = atoi(string(data))
		return err == nil && pid > 0
	})
	return pid
}

// An agent that ends while no sidecar lives, on a step with neither outputs
// nor reports, is judged by the end its keeper recorded, and is not run
// again: exit 0 finishes the step, exit 3 fails its try.
func TestWatch_AgentEndedWithNoSidecarIsJudgedByItsExit(t *testing.T) {
	for _, code := range []int{0, 3} {
		t.Run(fmt.Sprintf("exit %d", code), func(t *testing.T) {
			starts := filepath.Join(t.TempDir(), "starts")
			w := newTestWS(t, plan(`"stepseq":{"maxRetries":1}`,
				fmt.Sprintf(`"instruction":"count:%s pidfile:agent.pid waitfor:release exit:%d"`, starts, code)))
			first := w.startWatchProcess(fakeAgentPath)
			agent := w.waitPID("agent.pid")
			first.kill()
			w.writeFile("release", "")
			waitFor(t, func() bool { return !processExists(agent) })

			second := w.startWatchProcess(fakeAgentPath)
			want := planspec.StatusDone
			if code != 0 {
				want = planspec.StatusFailed
			}
			st := w.waitState("s1 judged", func(st *planspec.State) bool { return st.Run("s1").Status == want })
			if r := st.Run("s1"); r.Tries != 1 || code != 0 && !strings.Contains(deref(r.Error), "exit status 3") {
				t.Errorf("s1: %d tries, error %q", r.Tries, deref(r.Error))
			}
			if n := lineCount(starts); n != 1 {
				t.Fatalf("s1 started %d times; its agent had ended with exit %d", n, code)
			}
			w.waitJournal(fmt.Sprintf(`"reason":"judged by its exit, recorded by what reaped it","detail":{"code":%d}`, code))
			second.stop(t)
		})
	}
}

// Closing a run with no sidecar stops what its try started that outlived the
// sidecar and the agent, both killed: the wrapper's worker, in its group or
// in a session of its own.
func TestCloseRun_StopsTheWorkerOfAKilledWrapper(t *testing.T) {
	for _, setsid := range []bool{false, true} {
		t.Run(fmt.Sprintf("setsid=%v", setsid), func(t *testing.T) {
			out := t.TempDir()
			w := newTestWS(t, plan("", `"instruction":"pidfile:worker.pid waitfor:release"`))
			first := w.startWatchProcess(wrapperAgent(t, out, setsid))
			worker := w.waitPID("worker.pid")
			t.Cleanup(func() { _ = syscall.Kill(worker, syscall.SIGKILL) })
			wrapper := waitFilePID(t, filepath.Join(out, "s1"))
			first.kill()
			killPID(t, wrapper)
			if _, err := closeRunFiles(w.chain().WS, store.MainRun, 300*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if processExists(worker) {
				t.Error("the worker outlived the close of its run")
			}
		})
	}
}
