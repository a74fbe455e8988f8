package proc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/internal/testwait"
)

// fakeAgentPath is testdata/fakeagent, built once by TestMain: a real process
// that the tests launch as an agent.
var fakeAgentPath string

// effectWait bounds every wait for an effect: generous, for a loaded machine.
const effectWait = 5 * time.Minute

// TestMain builds the fake agent; launched again as its keeper, the test binary
// is nothing else.
func TestMain(m *testing.M) {
	// A keeper that should fail to start ends before it is one.
	if os.Getenv("STEPSEQ_TEST_NO_KEEPER") != "" && os.Getenv(keeperEnv) != "" {
		os.Exit(3)
	}
	if code, keeper := KeeperMain(); keeper {
		os.Exit(code)
	}
	dir, err := os.MkdirTemp("", "proc-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build := exec.Command("go", "build", "-o", dir, "../testdata/fakeagent")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, "build the fake agent:", err)
		os.Exit(1)
	}
	fakeAgentPath = filepath.Join(dir, "fakeagent")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// waitFor polls cond until it holds or effectWait passes.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testwait.For(t, effectWait, "the condition", cond)
}

// waitPID waits for a pid file an agent writes, and reads it.
func waitPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	waitFor(t, func() bool {
		data, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		_, err = fmt.Sscan(string(data), &pid)
		return err == nil && pid > 0
	})
	return pid
}

func processExists(pid int) bool {
	_, err := StartTicks(pid)
	return err == nil
}

// deadPID is the pid of a process that has ended and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}
