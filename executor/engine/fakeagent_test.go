package engine

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stepseq/stepseq/executor/proc"
)

// The tests' agent is testdata/fakeagent, built once by TestMain: a real process,
// not a shell, that obeys the directives in its prompt, so tests launch a real process
// without a shell. Directives, separated by spaces:
//
//	write:PATH      create PATH (relative to the working directory)
//	count:PATH      append "STEP TRY PID NS" to PATH (NS: the time); one line a call
//	stamp:PATH      write the time, in ns since the epoch, to PATH
//	out:TEXT        print TEXT on stdout      err:TEXT   print TEXT on stderr
//	exit:N          exit with status N
//	sleep:DUR       sleep before exiting
//	failfirst:PATH  fail (exit 1, "first try fails") unless PATH exists; create it
//	grandchild:DUR  leave a child holding stdout and stderr for DUR
//	ignoreterm      ignore SIGTERM (the group must be SIGKILLed)
//	late:PATH       leave a background job in the group that writes PATH once
//	                PATH.go exists, then lingers; its pid in PATH.pid
//	straggler:PATH  leave a child in the group that ignores SIGTERM; its pid in PATH
//	twin:DIR        flock DIR/<step>.lock while running; a twin found holding it goes to DIR/overlaps
//	slots:DIR/N     hold one of N flocks DIR/slot<i> while running; finding all N taken goes to DIR/over
//	daemon:PATH     leave a child in a session of its own (setsid) that ignores SIGTERM; its pid in PATH
//	stray:PATH      as daemon:, the child without fd 3 and with an empty environment: nothing names its try
//	envfile:PATH    write the STEPSEQ_* variables to PATH
//	argsfile:PATH   write the argv, one per line, to PATH
//	pidfile:PATH    write the pid to PATH, then continue
//	waitfor:PATH    block until PATH exists (tests release the agent)
func TestMain(m *testing.M) {
	// The tests launch their agents through a keeper, this test binary again.
	if code, keeper := proc.KeeperMain(); keeper {
		os.Exit(code)
	}
	if path := os.Getenv("STEPSEQ_TEST_SIDECAR"); path != "" {
		os.Exit(sidecarProcess(path))
	}
	if path := os.Getenv("STEPSEQ_TEST_CHECK"); path != "" {
		os.Exit(checkProcess(path))
	}
	dir, err := os.MkdirTemp("", "stepseq-fakeagent")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakeAgentPath = filepath.Join(dir, "fakeagent")
	fakeCLIPath = filepath.Join(dir, "fakecli")
	build := exec.Command("go", "build", "-o", dir, "../testdata/fakeagent", "../testdata/fakecli")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build the fake agents:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	removeBenchWorkspace()
	os.Exit(code)
}

// fakeAgentPath is the built fake agent.
var fakeAgentPath string
