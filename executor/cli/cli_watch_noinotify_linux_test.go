package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// noInotifyEnv makes the test binary a launcher: in the user namespace its
// parent made for it, it lowers the namespace's inotify instances to 0 (the
// limit is per user namespace: no one else's changes) and executes the
// program the variable names, with the arguments it was given.
const noInotifyEnv = "STEPSEQ_TEST_EXEC_WITHOUT_INOTIFY"

func init() {
	prog := os.Getenv(noInotifyEnv)
	if prog == "" {
		return
	}
	if err := os.WriteFile("/proc/sys/user/max_inotify_instances", []byte("0"), 0); err != nil {
		fmt.Fprintln(os.Stderr, "lower the inotify instances:", err)
		os.Exit(3)
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, noInotifyEnv+"=") })
	err := syscall.Exec(prog, append([]string{prog}, os.Args[1:]...), env)
	fmt.Fprintln(os.Stderr, "exec", prog, err)
	os.Exit(3)
}

// TestWatch_NoInotifyInstance: with every inotify instance taken, `watch` runs
// the plan all the same, polling, as it does when the watches run out; it says
// why once. The sidecar runs in a user namespace of its own whose instance
// limit is 0, so inotify_init1 fails with EMFILE for real.
func TestWatch_NoInotifyInstance(t *testing.T) {
	stepseq, agent := builtBinaries(t)
	dir := t.TempDir()
	plan := "steps:\n  - id: a\n    title: A\n    instruction: write a.txt\n    requiredOutputs: [a.txt]\n" +
		"  - id: b\n    title: B\n    instruction: write b.txt\n    requiredOutputs: [b.txt]\n"
	if err := os.MkdirAll(filepath.Join(dir, "plans"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plans", "p.yaml"), []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), effectWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "watch", "--exit-when-done", dir)
	cmd.Env = append(os.Environ(), noInotifyEnv+"="+stepseq, "STEP_AGENT_CMD="+agent+" -work 10ms")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 3 {
		t.Fatalf("the launcher failed:\n%s", stderr.String())
	}
	if err != nil {
		t.Fatalf("watch with no inotify instance: %v, want exit 0 once the plan is DONE\n%s", err, stderr.String())
	}
	for _, f := range []string{"a.txt", "b.txt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if !strings.Contains(stderr.String(), "max_user_instances") {
		t.Errorf("stderr does not say which limit was reached:\n%s", stderr.String())
	}
}
