package proc

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/store"
)

// startHeld starts a fake agent that lives until the test ends, with env and
// attr; it returns its pid and start time.
func startHeld(t *testing.T, env []string, attr *syscall.SysProcAttr) (int, uint64) {
	t.Helper()
	cmd := exec.Command(fakeAgentPath, "waitfor:"+t.TempDir()+"/never")
	cmd.Env, cmd.SysProcAttr = env, attr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	var ticks uint64
	waitFor(t, func() bool {
		var err error
		ticks, err = StartTicks(cmd.Process.Pid)
		return err == nil
	})
	return cmd.Process.Pid, ticks
}

// What a try started is found once its lock is free: by the try's marks in a
// process's environment, by its process group, by its session; and a group or
// session whose id a new process took over is not the try's.
func TestTryProcs_FindsWhatATryStarted(t *testing.T) {
	ws := store.Workspace{Dir: "/w", State: "/w/state.json"}
	marks := tryMarksOf(ws, "s1", 2)
	if got := tryMarks(AgentEnv(os.Environ(), "s1", 2, ws, nil)); !sameSet(got, marks) {
		t.Fatalf("the marks AgentEnv sets %q are not those looked for %q", got, marks)
	}
	path := []string{"PATH=" + os.Getenv("PATH")}
	t.Run("by its marks", func(t *testing.T) {
		pid, _ := startHeld(t, append(path, marks...), &syscall.SysProcAttr{Setsid: true})
		if !slices.Contains(tryProcs(TryRecord{Step: "s1", Try: 2}, marks), pid) {
			t.Errorf("a process carrying the marks is not found")
		}
		if slices.Contains(tryProcs(TryRecord{Step: "s1", Try: 3}, tryMarksOf(ws, "s1", 3)), pid) {
			t.Errorf("another try's process is found")
		}
	})
	t.Run("by its group", func(t *testing.T) {
		pid, ticks := startHeld(t, path, &syscall.SysProcAttr{Setpgid: true})
		if !slices.Contains(tryProcs(TryRecord{PID: pid, StartTicks: ticks, Pgid: pid}, marks), pid) {
			t.Errorf("the try's group is not found")
		}
		if slices.Contains(tryProcs(TryRecord{PID: pid, StartTicks: ticks + 1, Pgid: pid}, marks), pid) {
			t.Errorf("a group led by a process that took the agent's pid is taken for the try's")
		}
	})
	t.Run("by its session", func(t *testing.T) {
		pid, ticks := startHeld(t, path, &syscall.SysProcAttr{Setsid: true})
		dead := deadPID(t)
		if !slices.Contains(tryProcs(TryRecord{PID: dead, Pgid: dead, Sid: pid}, marks), pid) {
			t.Errorf("the try's session is not found")
		}
		if !tryRunning(TryRecord{PID: pid, StartTicks: ticks, Sid: pid}, marks) {
			t.Errorf("tryRunning misses the session")
		}
	})
	t.Run("waits for them", func(t *testing.T) {
		cmd := exec.Command(fakeAgentPath, "sleep:300ms")
		cmd.Env = append(path, marks...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { _ = cmd.Wait() }()
		done := make(chan struct{})
		go func() {
			waitTryGone(context.Background(), TryRecord{Step: "s1", Try: 2}, marks)
			close(done)
		}()
		select {
		case <-done:
			if processExists(cmd.Process.Pid) {
				t.Error("waitTryGone returned while the process lived")
			}
		case <-time.After(effectWait):
			t.Fatal("waitTryGone did not return once the process ended")
		}
	})
}

func sameSet(a, b []string) bool {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(a, b)
}
