package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// TestWatch_RestartAtOnceAfterKill9 kills a sidecar with SIGKILL while its agent
// still runs, and starts a new one as soon as the old one is reaped: the new one
// takes the lock (it does not exit 2 calling the workspace locked), waits for the
// old agent instead of launching another, and finishes the step.
func TestWatch_RestartAtOnceAfterKill9(t *testing.T) {
	t.Parallel()
	stepseq, demo := builtBinaries(t)
	fake := filepath.Join(filepath.Dir(demo), "fakeagent")
	dir := t.TempDir()
	plan := "steps:\n  - id: long\n    title: Long\n    instruction: pidfile:agent.pid waitfor:go write:out.txt\n    requiredOutputs: [out.txt]\n"
	if err := os.MkdirAll(filepath.Join(dir, "plans"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plans", "p.yaml"), []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	watch := func() (*exec.Cmd, *bytes.Buffer, <-chan error) {
		cmd := exec.Command(stepseq, "watch", "--grace", "300ms", dir)
		cmd.Env = append(os.Environ(), "STEP_AGENT_CMD="+fake)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// exited delivers Wait's result to one reader; done closes for the cleanup.
		exited, done := make(chan error, 1), make(chan struct{})
		go func() { exited <- cmd.Wait(); close(done) }()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-done
		})
		return cmd, &stderr, exited
	}
	first, _, firstExited := watch()
	agent := waitAgent(t, dir, 0)
	defer func() { _ = syscall.Kill(agent, syscall.SIGKILL) }()
	waitFile(t, filepath.Join(dir, "agent.pid"))

	_ = first.Process.Signal(syscall.SIGKILL)
	<-firstExited // reaped
	if !alive(agent) {
		t.Fatal("the agent died with its sidecar; it runs in its own process group")
	}
	second, stderr, secondExited := watch()

	// The new sidecar records itself in the lock once it holds it.
	lockPath := filepath.Join(dir, store.MetaDir, "lock")
	for deadline := time.Now().Add(effectWait); ; time.Sleep(5 * time.Millisecond) {
		select {
		case err := <-secondExited:
			t.Fatalf("the new sidecar exited (%v) instead of taking the lock:\n%s", err, stderr)
		default:
		}
		var h store.Holder
		data, _ := os.ReadFile(lockPath)
		if json.Unmarshal(bytes.TrimSpace(data), &h) == nil && h.PID == second.Process.Pid {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new sidecar never took the lock; lock file: %s\nstderr:\n%s", data, stderr)
		}
	}
	journal := filepath.Join(dir, store.MetaDir, "journal.jsonl")
	for deadline := time.Now().Add(effectWait); ; time.Sleep(5 * time.Millisecond) {
		data, _ := os.ReadFile(journal)
		if strings.Contains(string(data), `"action":"running"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new sidecar does not wait for the old agent; journal:\n%s", data)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sf := &store.StateFile{Path: filepath.Join(dir, "state.json")}
	for deadline := time.Now().Add(effectWait); ; time.Sleep(5 * time.Millisecond) {
		st, err := sf.Read()
		if err == nil && st.Status == planspec.StatusDone {
			if r := st.Run("long"); r.Tries != 1 {
				t.Errorf("tries = %d, want 1: the interruption is not counted", r.Tries)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the plan never finished; state: %+v, %v\nstderr:\n%s", st, err, stderr)
		}
	}
	logs, _ := filepath.Glob(filepath.Join(dir, store.MetaDir, "logs", "long", "*.log"))
	pids := 0
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		pids += strings.Count(string(data), "=== stepseq: step long")
	}
	if pids > 2 {
		t.Errorf("%d tries of long logged: a second agent ran while the first lived", pids)
	}
	_ = second.Process.Signal(syscall.SIGTERM)
	if err := <-secondExited; err != nil {
		t.Errorf("the new sidecar after SIGTERM: %v\n%s", err, stderr)
	}
}

// waitFile waits for path to exist and hold something.
func waitFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(effectWait); ; time.Sleep(5 * time.Millisecond) {
		if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
	}
}
