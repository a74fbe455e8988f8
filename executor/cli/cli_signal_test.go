package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// builtBinaries builds stepseq, the demo agent and the executor's fake agent for
// the signal tests, which need real processes to signal: once for every test that
// asks, into a folder of their own that no test writes to.
func builtBinaries(t *testing.T) (stepseq, agent string) {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "stepseq-cli-bin-")
		if binErr != nil {
			return
		}
		for pkg, name := range map[string]string{"github.com/stepseq/stepseq": "stepseq", "github.com/stepseq/stepseq/examples/demoagent": "demoagent", "github.com/stepseq/stepseq/executor/testdata/fakeagent": "fakeagent"} {
			out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, name), pkg).CombinedOutput()
			if err != nil {
				binErr = &buildError{pkg: pkg, out: string(out)}
				return
			}
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return filepath.Join(binDir, "stepseq"), filepath.Join(binDir, "demoagent")
}

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

type buildError struct{ pkg, out string }

func (e *buildError) Error() string { return "build " + e.pkg + ": " + e.out }

// startWatch runs `stepseq watch` on a workspace whose one step's agent runs for a
// minute, and returns once that agent runs.
func startWatch(t *testing.T, stepseq, agent string) (cmd *exec.Cmd, dir string, agentPID int) {
	t.Helper()
	dir = t.TempDir()
	plan := "steps:\n  - id: long\n    title: A long step\n    instruction: write out.txt\n    requiredOutputs: [out.txt]\n"
	if err := os.MkdirAll(filepath.Join(dir, "plans"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plans", "p.yaml"), []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(stepseq, "watch", "--grace", "300ms", dir)
	cmd.Env = append(os.Environ(), "STEP_AGENT_CMD="+agent+" -work 60s")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, dir, waitAgent(t, dir, 0)
}

// waitAgent waits for the sidecar's lock file to name a running agent other than
// not, and returns its pid.
func waitAgent(t *testing.T, dir string, not int) int {
	t.Helper()
	deadline := time.Now().Add(effectWait)
	for {
		data, _ := os.ReadFile(filepath.Join(dir, ".stepseq", "lock"))
		if i := strings.Index(string(data), `"agent":{`); i >= 0 {
			if j := strings.Index(string(data)[i:], `"pid":`); j >= 0 {
				rest := string(data)[i+j+len(`"pid":`):]
				if pid, _ := strconv.Atoi(rest[:strings.IndexAny(rest, ",}")]); pid != 0 && pid != not {
					return pid
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no agent started")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}

func TestWatch_SIGTERMStopsGracefully(t *testing.T) {
	t.Parallel()
	stepseq, demo := builtBinaries(t)
	cmd, dir, agent := startWatch(t, stepseq, demo)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("watch after SIGTERM: %v, want exit 0", err)
	}
	if alive(agent) {
		t.Errorf("agent %d outlived the sidecar's shutdown", agent)
	}
	state, _ := os.ReadFile(filepath.Join(dir, "state.json"))
	if !strings.Contains(string(state), `"status": "IN_PROGRESS"`) {
		t.Errorf("the interrupted step should stay IN_PROGRESS:\n%s", state)
	}
	journal, _ := os.ReadFile(filepath.Join(dir, ".stepseq", "journal.jsonl"))
	if !strings.Contains(string(journal), `"event":"interrupted"`) {
		t.Error("the interruption is not in the journal")
	}
}

func TestWatch_SecondSignalExitsAtOnce(t *testing.T) {
	t.Parallel()
	stepseq, agent := builtBinaries(t)
	cmd, dir, first := startWatch(t, stepseq, agent)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	_ = syscall.Kill(first, syscall.SIGKILL)
	// An agent that ignores SIGTERM and a grace period of an hour: only a second
	// signal can make the sidecar exit soon.
	if err := os.WriteFile(filepath.Join(dir, "plans", "p.yaml"), []byte("steps:\n  - id: stubborn\n    title: Stubborn\n    instruction: ignoreterm pidfile:stubborn.pid sleep:60s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(filepath.Join(dir, "state.json"))
	slow := exec.Command(stepseq, "watch", "--grace", "1h", dir)
	var stderr syncBuffer
	slow.Stderr = &stderr
	slow.Env = append(os.Environ(), "STEP_AGENT_CMD="+filepath.Join(filepath.Dir(agent), "fakeagent"))
	if err := slow.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = slow.Process.Kill() }()
	stubborn := waitAgent(t, dir, first)
	defer func() { _ = syscall.Kill(stubborn, syscall.SIGKILL) }() // exiting at once leaves it behind
	// The agent writes its pid once it ignores SIGTERM.
	for deadline := time.Now().Add(effectWait); ; time.Sleep(2 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "stubborn.pid")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stubborn agent never got ready")
		}
	}
	// Signals a moment apart are one stop: send the second once stepseq says that
	// the stop is under way.
	_ = slow.Process.Signal(syscall.SIGTERM)
	for deadline := time.Now().Add(effectWait); ; time.Sleep(2 * time.Millisecond) {
		if strings.Contains(stderr.String(), "a second signal exits at once") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first signal was not taken")
		}
	}
	_ = slow.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- slow.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
			t.Errorf("exit = %v, want 130", err)
		}
	case <-time.After(effectWait):
		t.Fatal("a second signal did not stop the sidecar at once")
	}
}

// TestWatch_TwoSignalsAtOnceAreOneStop: coreutils timeout signals the process and
// then its group; the two signals are one graceful stop, not a forced exit.
func TestWatch_TwoSignalsAtOnceAreOneStop(t *testing.T) {
	t.Parallel()
	stepseq, demo := builtBinaries(t)
	cmd, _, agent := startWatch(t, stepseq, demo)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("watch after two SIGTERMs at once: %v, want exit 0 (a graceful stop)", err)
	}
	if alive(agent) {
		t.Errorf("agent %d outlived the sidecar's shutdown", agent)
	}
}

// After a Ctrl-C the step is not running: status says interrupted, to be retried.
func TestStatus_AfterCtrlCShowsInterrupted(t *testing.T) {
	t.Parallel()
	stepseq, demo := builtBinaries(t)
	cmd, dir, _ := startWatch(t, stepseq, demo)
	_ = cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("watch after SIGINT: %v, want exit 0", err)
	}
	out, _ := exec.Command(stepseq, "status", "--json", dir).Output()
	if strings.Contains(string(out), `"running": true`) || !strings.Contains(string(out), `"phase": "interrupted"`) {
		t.Errorf("status --json after a Ctrl-C, want phase interrupted and not running:\n%s", out)
	}
	out, _ = exec.Command(stepseq, "status", dir).Output()
	table := string(out)
	if !strings.Contains(table, "interrupted") || strings.Contains(table, "running ") {
		t.Errorf("status after a Ctrl-C, want the step interrupted, not running:\n%s", table)
	}
}
