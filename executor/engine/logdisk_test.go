package engine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/internal/testfs"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/planspec"
)

// logT0 is a fixed instant the tests count times from.
var logT0 = time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)

// fullDisk mounts a 256 KiB tmpfs at dir and fills it.
func fullDisk(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := testfs.MountTmpfs(t, dir, "size=256k"); err != nil {
		t.Skipf("a full disk needs a tmpfs, and mounting one needs root (CAP_SYS_ADMIN): %v", err)
	}
	testfs.FillDisk(t, dir)
}

// failingWriter fails every write, as a log on a full disk would without a TryLog.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// TestStart_LogNeverDecides runs real agents whose log fails on every write: the
// agent never sees it, and its output still reaches the Exit.
func TestStart_LogNeverDecides(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		prompt, stdout, stderr string
		code                   int
	}{
		{"out:fine write:" + filepath.Join(dir, "out.txt") + " exit:0", "fine\n", "", 0},
		{"out:trying err:broken exit:3", "trying\n", "broken\n", 3},
	} {
		p, err := proc.Start(proc.Spec{Argv: []string{agentBinary(t), tt.prompt}, Dir: dir, Log: failingWriter{}})
		if err != nil {
			t.Fatal(err)
		}
		var exit core.Exit
		select {
		case exit = <-p.Done():
		case <-time.After(effectWait):
			t.Fatal("the agent did not end")
		}
		if exit.Code != tt.code || exit.Err != nil || exit.Stdout != tt.stdout || exit.Stderr != tt.stderr {
			t.Errorf("%s: exit = %+v", tt.prompt, exit)
		}
	}
}

// TestCheck_FullLogDisk runs a plan whose logs go to a full tmpfs: a step that
// exits 0 with its outputs present is DONE, and a failing step's stderr is its
// error in state.json.
func TestCheck_FullLogDisk(t *testing.T) {
	w := newTestWS(t, plan("",
		`"instruction":"out:done write:a.txt exit:0","requiredOutputs":["a.txt"]`,
		`"instruction":"err:the-real-reason exit:3"`))
	fullDisk(t, w.path(".stepseq/logs"))
	w.env["STEP_MAX_RETRIES"] = "1"
	if err := w.check(); err != nil && !errors.Is(err, ErrStepFailed) {
		t.Fatal(err)
	}
	st := w.read()
	if r := st.Run("s1"); r.Status != planspec.StatusDone || r.Error != nil {
		t.Errorf("s1 = %+v, want DONE: a lost log never fails a step", r)
	}
	if r := st.Run("s2"); r.Error == nil || !strings.Contains(*r.Error, "the-real-reason") {
		t.Errorf("s2 error = %v, want the agent's stderr", r.Error)
	}
}
