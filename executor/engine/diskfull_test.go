//go:build linux

package engine

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/internal/testfs"
	"github.com/stepseq/stepseq/planspec"
)

// A state write that fails (a full disk, a write-protected folder) stops every
// launch the file on disk does not record; it is said once, retried with backoff
// and on events, and the sidecar resumes by itself once the write lands.

// starts is the agent starts the count: directive recorded, one line each.
func starts(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "\n")
}

// failingWriteSidecar runs the sidecar on w with a step whose first try fails once
// released; break makes state writes fail while it runs, mend undoes that. The
// second try must wait until a write lands again.
func failingWriteSidecar(t *testing.T, w *testWS, breakWrites func() (mend func()), nudge func()) {
	out := t.TempDir() // the agent's own files, on a disk that has room
	count, release := filepath.Join(out, "starts"), filepath.Join(out, "release")
	w.write(plan("", `"instruction":"count:`+count+` waitfor:`+release+` failfirst:`+filepath.Join(out, "ff")+`"`))
	var logs syncBuffer
	c := w.chain()
	c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	sc, err := NewSidecar(c.Runtime, SidecarOptions{})
	if err != nil {
		t.Fatal(err)
	}
	run := &sidecarRun{Sidecar: sc, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	run.cancel = cancel
	go func() { run.done <- sc.Run(ctx) }()
	t.Cleanup(func() { run.stop(t) })

	waitFor(t, func() bool { return starts(t, count) == 1 })
	mend := breakWrites()
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The first try failed; its verdict cannot be written. Several retries pass
	// (the backoff timer is an input of the loop) and nothing is launched.
	waitFor(t, func() bool { return strings.Contains(logs.String(), "state not written") })
	passes := sc.Passes()
	waitFor(t, func() bool { return sc.Passes() >= passes+3 })
	if n := starts(t, count); n != 1 {
		t.Fatalf("%d agent starts while the state could not be written; want 1", n)
	}
	if r := w.read().Run("s1"); r.Tries != 1 || r.Status != planspec.StatusInProgress {
		t.Fatalf("state on disk: s1 %s after %d tries; want IN_PROGRESS, 1", r.Status, r.Tries)
	}
	if n := strings.Count(logs.String(), "state not written"); n != 1 {
		t.Errorf("the failed write was logged %d times; want once:\n%s", n, logs.String())
	}
	mend()
	if nudge != nil {
		nudge()
	}
	st := w.waitState("DONE after the write came back", done)
	if r := st.Run("s1"); r.Tries != 2 || starts(t, count) != 2 {
		t.Errorf("s1: %d tries on disk, %d starts; want 2 and 2", r.Tries, starts(t, count))
	}
	if !strings.Contains(logs.String(), "state written again: resuming") {
		t.Errorf("the resumption was not logged:\n%s", logs.String())
	}
}

// TestSidecar_DiskFull: the workspace on a 256 KiB tmpfs, filled while a try runs.
// Space comes back with no file event the sidecar watches: the retry timer lands
// the write.
func TestSidecar_DiskFull(t *testing.T) {
	w := tmpfsWorkspace(t, "256k")
	failingWriteSidecar(t, w, func() func() { return testfs.FillDisk(t, w.dir) }, nil)
}

// TestSidecar_ReadOnlyFolder: the workspace folder write-protected while a try
// runs; once writable again, a file event (a trigger) lands the write.
func TestSidecar_ReadOnlyFolder(t *testing.T) {
	w := newTestWS(t, "")
	failingWriteSidecar(t, w, func() func() { return writeProtect(t, w.dir) }, func() {
		if err := WriteTrigger(w.chain().WS, core.Trigger{From: "check"}); err != nil {
			t.Fatal(err)
		}
	})
}

// fsImmutable is FS_IMMUTABLE_FL of linux/fs.h, the flag chattr +i sets.
const fsImmutable = 0x10

// writeProtect makes dir refuse new files: for a user, its mode; for root, whom
// modes do not stop, the immutable attribute (chattr +i). It skips, saying why,
// where neither is possible.
func writeProtect(t *testing.T, dir string) (mend func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		return func() { _ = os.Chmod(dir, 0o755) }
	}
	set := func(on bool) error {
		f, err := os.Open(dir)
		if err != nil {
			return err
		}
		defer f.Close()
		flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
		if err != nil {
			return err
		}
		if on {
			flags |= fsImmutable
		} else {
			flags &^= fsImmutable
		}
		return unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags))
	}
	if err := set(true); err != nil {
		t.Skipf("root ignores folder modes, and the immutable attribute is refused here (%v)", err)
	}
	mended := false
	mend = func() {
		if !mended {
			mended = true
			if err := set(false); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(mend)
	return mend
}

// TestCheck_DiskFull: `stepseq check` on a full disk launches nothing and exits
// with the write's error; once space is back, the next check writes and runs.
func TestCheck_DiskFull(t *testing.T) {
	w := tmpfsWorkspace(t, "256k")
	count := filepath.Join(t.TempDir(), "starts")
	w.write(plan("", `"instruction":"count:`+count+` write:out","requiredOutputs":["out"]`))
	before, _ := os.ReadFile(w.state)
	free := testfs.FillDisk(t, w.dir)
	c := w.chain()
	c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	err := c.Check(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no space left on device") || !strings.Contains(err.Error(), "state.json") {
		t.Fatalf("check on a full disk: %v; want the state write's error", err)
	}
	if after, _ := os.ReadFile(w.state); string(after) != string(before) || starts(t, count) != 0 {
		t.Fatalf("check on a full disk changed the state or launched %d agents", starts(t, count))
	}
	free()
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	if st := w.read(); !done(st) || st.Run("s1").Tries != 1 || starts(t, count) != 1 {
		t.Errorf("after space came back: %s, s1 %d tries, %d starts", st.Status, st.Run("s1").Tries, starts(t, count))
	}
}
