package engine

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/internal/testfs"
	"github.com/stepseq/stepseq/executor/proc"
)

// orphan starts a process that is not this one's child (its parent, a shell, has
// left) and returns its pid; it is killed when the test ends.
func orphan(t *testing.T) int {
	t.Helper()
	out, err := exec.Command("sh", "-c", "sleep 120 >/dev/null 2>&1 & echo $!").Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	return pid
}

// TestWaitGone: WaitGone returns once a process that is not a child exits (a
// pidfd on Linux, kqueue's EVFILT_PROC on macOS and the BSDs), returns ctx's
// error when ctx ends first, and returns at once for a pid that is gone. Alive
// tells the process from another with the same pid by its start.
func TestWaitGone(t *testing.T) {
	pid := orphan(t)
	ticks, err := proc.StartTicks(pid)
	if err != nil {
		t.Fatal(err)
	}
	if !proc.Alive(pid, ticks) {
		t.Fatalf("Alive(%d, %d) is false for a running process", pid, ticks)
	}
	if ticks != 0 && proc.Alive(pid, ticks+1) {
		t.Fatalf("Alive(%d, %d): a start that is not the process's is taken for it", pid, ticks+1)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := testfs.Within(t, effectWait, "WaitGone with an ended context", func() error { return proc.WaitGone(ctx, pid) }); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitGone with an ended context: %v, want context.Canceled", err)
	}

	gone := make(chan error, 1)
	go func() { gone <- proc.WaitGone(context.Background(), pid) }()
	select {
	case err := <-gone:
		t.Fatalf("WaitGone returned (%v) while the process runs", err)
	default:
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-gone:
		if err != nil {
			t.Fatalf("WaitGone: %v", err)
		}
	case <-time.After(effectWait):
		t.Fatalf("WaitGone did not return within %s of the process's end", effectWait)
	}
	if proc.Alive(pid, ticks) {
		t.Errorf("Alive(%d, %d) after the process ended", pid, ticks)
	}
	if err := testfs.Within(t, effectWait, "WaitGone on an ended process", func() error { return proc.WaitGone(context.Background(), pid) }); err != nil {
		t.Errorf("WaitGone on an ended process: %v", err)
	}
}
