package engine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// sidecarProcess runs a sidecar on statePath until killed: the test binary as a
// separate process, so that tests can kill -9 it. STEPSEQ_TEST_MAX_AGENTS, when
// set, is its --max-agents.
func sidecarProcess(statePath string) int {
	return helperProcess(statePath, func(rt *Runtime) error {
		opt := SidecarOptions{}
		if n := os.Getenv("STEPSEQ_TEST_MAX_AGENTS"); n != "" {
			opt.MaxAgents = atoi(n)
		}
		sc, err := NewSidecar(rt, opt)
		if err != nil {
			return err
		}
		return sc.Run(context.Background())
	})
}

// helperProcess runs a driver on statePath's workspace in this process, which a
// test started from its own binary.
func helperProcess(statePath string, run func(rt *Runtime) error) int {
	rt, err := NewRuntime(statePath, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := run(rt); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func (w *testWS) startSidecarProcess(extraEnv ...string) *exec.Cmd {
	return w.startProcess("STEPSEQ_TEST_SIDECAR", extraEnv...)
}

// startProcess starts the test binary as the helper that env names, on the
// workspace, with extraEnv (NAME=VALUE) beside.
func (w *testWS) startProcess(env string, extraEnv ...string) *exec.Cmd {
	w.t.Helper()
	cmd := exec.Command(testBinary(w.t))
	cmd.Env = append(os.Environ(), env+"="+w.state, "STEP_AGENT_CMD="+w.env["STEP_AGENT_CMD"])
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// TestSidecar_KillNineMidStep kills the sidecar while its agent runs: the state is
// valid, the restarted sidecar waits for the live agent instead of launching a
// second one, then judges the step by how the agent ended, which the keeper
// that launched it recorded: exit 0, so the step is not run again.
func TestSidecar_KillNineMidStep(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"pidfile:agent.pid waitfor:release write:out","requiredOutputs":["out"]`, `"instruction":"write:two"`))
	first := w.startSidecarProcess()
	w.waitState("s1 running", func(st *planspec.State) bool { return st.Run("s1").Status == planspec.StatusInProgress })
	agent := w.waitPID("agent.pid")
	// The agent runs before its launch is journaled: the count of launches
	// below starts from the journaled one.
	w.waitJournal(`"event":"launch","step":"s1"`)

	_ = first.Process.Signal(syscall.SIGKILL)
	_ = first.Wait()
	if !processExists(agent) {
		t.Fatal("the agent died with the sidecar; it runs in its own process group and should not")
	}
	if _, err := (&store.StateFile{Path: w.state}).Read(); err != nil {
		t.Fatalf("state after kill -9: %v", err)
	}

	w.startSidecarProcess()
	// The restarted sidecar must wait for the agent from before, not launch another.
	w.waitJournal(`"action":"running"`)
	if n := logCount(w, "s1"); n != 1 {
		data, _ := os.ReadFile(w.path(".stepseq/journal.jsonl"))
		t.Fatalf("%d launches of s1 while the first agent lived:\n%s", n, data)
	}
	w.writeFile("release", "")
	st := w.waitState("DONE", done)
	if r := st.Run("s1"); r.Tries != 1 || r.Agent == nil || r.Agent.Interruptions != 0 {
		t.Errorf("s1 = tries %d %+v, want 1 try and no interruption", r.Tries, r.Agent)
	}
	if n := logCount(w, "s1"); n != 1 {
		t.Errorf("s1 launched %d times; its orphan's output said done", n)
	}
	w.waitJournal(`"event":"orphan","step":"s1","try":1,"reason":"judged by its exit, recorded by what reaped it"`)
}

// TestSidecar_NoLeaks runs a whole plan and checks every goroutine ended but
// the one that hears the keeper, which lives as long as the process.
func TestSidecar_NoLeaks(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreAnyFunction("github.com/stepseq/stepseq/executor/proc.(*keeperClient).read"))
	w := newTestWS(t, plan("", `"instruction":"write:a","requiredOutputs":["a"]`, `"instruction":"out:b"`))
	run := w.startSidecar(SidecarOptions{})
	w.waitState("DONE", done)
	run.stop(t)
}
