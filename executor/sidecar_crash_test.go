package executor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/stepseq/stepseq/planspec"
)

// sidecarProcess runs a sidecar on statePath until killed: the test binary as a
// separate process, so that tests can kill -9 it.
func sidecarProcess(statePath string) int {
	rt, err := NewRuntime(statePath, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sc, err := NewSidecar(rt, SidecarOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := sc.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func (w *testWS) startSidecarProcess() *exec.Cmd {
	w.t.Helper()
	cmd := exec.Command(testBinary(w.t))
	cmd.Env = append(os.Environ(), "STEPSEQ_TEST_SIDECAR="+w.state, "STEP_AGENT_CMD="+w.env["STEP_AGENT_CMD"])
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
// second one, then retries the step without spending a try.
func TestSidecar_KillNineMidStep(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"pidfile:agent.pid waitfor:release write:out","requiredOutputs":["out"]`, `"instruction":"write:two"`))
	first := w.startSidecarProcess()
	w.waitState("s1 running", func(st *planspec.State) bool { return st.Run("s1").Status == planspec.StatusInProgress })
	agent := w.waitPID("agent.pid")

	_ = first.Process.Signal(syscall.SIGKILL)
	_ = first.Wait()
	if !processExists(agent) {
		t.Fatal("the agent died with the sidecar; it runs in its own process group and should not")
	}
	if _, err := (&StateFile{Path: w.state}).Read(); err != nil {
		t.Fatalf("state after kill -9: %v", err)
	}

	w.startSidecarProcess()
	// The restarted sidecar must wait for the agent from before, not launch another.
	waitFor(t, func() bool {
		data, _ := os.ReadFile(w.path(".stepseq/journal.jsonl"))
		return strings.Contains(string(data), `"action":"running"`)
	})
	if logCount(w, "s1") != 1 {
		t.Fatalf("a second agent was launched for s1 while the first lived")
	}
	// Let the old agent finish; the step is then retried as interrupted.
	w.writeFile("release", "")
	st := w.waitState("DONE", done)
	if r := st.Run("s1"); r.Tries != 1 || r.Agent == nil || r.Agent.Interruptions != 1 {
		t.Errorf("s1 = tries %d %+v, want 1 try and 1 interruption", r.Tries, r.Agent)
	}
}

// TestSidecar_NoLeaks runs a whole plan and checks every goroutine ended.
func TestSidecar_NoLeaks(t *testing.T) {
	defer goleak.VerifyNone(t)
	w := newTestWS(t, plan("", `"instruction":"write:a","requiredOutputs":["a"]`, `"instruction":"out:b"`))
	run := w.startSidecar(SidecarOptions{})
	w.waitState("DONE", done)
	run.stop(t)
}
