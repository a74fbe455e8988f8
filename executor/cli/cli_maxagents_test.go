package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// TestWatch_MaxAgentsCountsTheAgentLeftRunning: `watch --max-agents 1` is
// killed with SIGKILL while its agent runs; the next one waits for that agent
// and counts it: a run started beside it starts its agent only once that agent
// has ended, and /metrics shows stepseq_running_agents 1 until then, 0 after.
// Each agent holds the one slot lock of a pool of one while it runs, and notes
// in slots/over when it finds the slot taken.
func TestWatch_MaxAgentsCountsTheAgentLeftRunning(t *testing.T) {
	t.Parallel()
	stepseq, demo := builtBinaries(t)
	fake := filepath.Join(filepath.Dir(demo), "fakeagent")
	dir, out := t.TempDir(), t.TempDir()
	slots, starts := filepath.Join(out, "slots"), filepath.Join(out, "starts")
	long := "steps:\n  - id: long\n    title: Long\n    instruction: slots:" + slots + "/1 pidfile:agent.pid waitfor:go write:out.txt\n    requiredOutputs: [out.txt]\n"
	beside := "name: beside\nsteps:\n  - id: b\n    title: B\n    instruction: slots:" + slots + "/1 count:" + starts + "\n"
	if err := os.MkdirAll(filepath.Join(dir, "plans"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plans", "p.yaml"), []byte(long), 0o644); err != nil {
		t.Fatal(err)
	}
	besidePlan := filepath.Join(out, "beside.yaml")
	if err := os.WriteFile(besidePlan, []byte(beside), 0o644); err != nil {
		t.Fatal(err)
	}
	watch := func(extra ...string) (*exec.Cmd, *bytes.Buffer, <-chan error) {
		args := append([]string{"watch", "--max-agents", "1", "--grace", "300ms", "--log-level", "warn"}, append(extra, dir)...)
		return startCmd(t, stepseq, args, "STEP_AGENT_CMD="+fake)
	}
	first, _, firstExited := watch()
	waitFile(t, filepath.Join(dir, "agent.pid"))
	agent := waitAgent(t, dir, 0)
	defer func() { _ = syscall.Kill(agent, syscall.SIGKILL) }()
	_ = first.Process.Signal(syscall.SIGKILL)
	<-firstExited
	if !alive(agent) {
		t.Fatal("the agent died with its sidecar; it runs in its own process group")
	}

	addr := freeAddr(t)
	second, stderr, secondExited := watch("--listen", addr)
	journal := filepath.Join(dir, store.MetaDir, "journal.jsonl")
	waitFor(t, "the new sidecar to wait for the agent left running", func() bool {
		data, _ := os.ReadFile(journal)
		return strings.Contains(string(data), `"action":"running"`)
	})
	if outp, err := exec.Command(stepseq, "start", besidePlan, dir).CombinedOutput(); err != nil {
		t.Fatalf("stepseq start: %v\n%s", err, outp)
	}
	besideJournal := filepath.Join(dir, store.MetaDir, "runs", "beside", "journal.jsonl")
	var added string
	waitFor(t, "run beside's try to start or wait for a slot", func() bool {
		data, _ := os.ReadFile(besideJournal)
		added = string(data)
		return strings.Contains(added, `"event":"launch","step":"b"`) || strings.Contains(added, `"event":"launch-queued","step":"b"`)
	})
	if strings.Contains(added, `"event":"launch","step":"b"`) || lines(starts) != 0 {
		t.Fatalf("run beside's agent started beside the agent left running, over --max-agents 1:\n%s", added)
	}
	if _, body, err := get("http://" + addr + "/metrics"); err != nil || !strings.Contains(body, "stepseq_running_agents 1\n") {
		t.Errorf("/metrics while the agent left running runs (%v):\n%s", err, grepLines(body, "stepseq_running_agents"))
	}

	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"state.json", "state.beside.json"} {
		sf := &store.StateFile{Path: filepath.Join(dir, f)}
		waitFor(t, f+" DONE", func() bool {
			st, err := sf.Read()
			return err == nil && st.Status == planspec.StatusDone
		})
	}
	if n := lines(starts); n != 1 {
		t.Errorf("run beside's agent started %d times, want 1", n)
	}
	if data, err := os.ReadFile(filepath.Join(slots, "over")); err == nil {
		t.Errorf("two agents at once under --max-agents 1:\n%s", data)
	}
	waitFor(t, "stepseq_running_agents 0 on /metrics", func() bool {
		_, body, err := get("http://" + addr + "/metrics")
		return err == nil && strings.Contains(body, "stepseq_running_agents 0\n")
	})
	_ = second.Process.Signal(syscall.SIGTERM)
	if err := <-secondExited; err != nil {
		t.Errorf("the new sidecar after SIGTERM: %v\n%s", err, stderr)
	}
}

// startCmd starts name with args and env beside the test's environment, and
// kills it when the test ends; exited delivers Wait's result once.
func startCmd(t *testing.T, name string, args []string, env ...string) (*exec.Cmd, *bytes.Buffer, <-chan error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited, done := make(chan error, 1), make(chan struct{})
	go func() { exited <- cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	return cmd, &stderr, exited
}

// lines counts the lines of the file at path; 0 when it is missing.
func lines(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(data), "\n")
}

// grepLines is text's lines that hold s.
func grepLines(text, s string) string {
	var keep []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
