package engine

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
	"golang.org/x/sys/unix"
)

// deadPID is the pid of a process that has ended and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// TestTryLock_DeadHolderLeftADescriptor holds the lock only through a descriptor
// a child inherited from a holder that is now dead, as a child between fork and
// exec holds it for a moment: TryLock waits until the child lets go, instead of
// reporting the workspace locked by a dead process.
func TestTryLock_DeadHolderLeftADescriptor(t *testing.T) {
	ws, err := store.NewWorkspace(filepath.Join(t.TempDir(), "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(ws.LockPath()), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(ws.LockPath(), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	rec, _ := json.Marshal(store.Holder{PID: deadPID(t), Kind: "watch"})
	if _, err := f.Write(rec); err != nil {
		t.Fatal(err)
	}
	release := filepath.Join(ws.Dir, "release")
	child := exec.Command(agentBinary(t), "waitfor:"+release)
	child.ExtraFiles = []*os.File{f} // passed on purpose: the fork-exec window, held open
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	if holding(t, child.Process.Pid, ws.LockPath()) == "" {
		t.Fatal("the child does not hold the lock file: holding cannot see descriptors")
	}

	saved := store.DeadHolderWait
	defer func() { store.DeadHolderWait = saved }()
	store.DeadHolderWait = 0
	if _, h, err := store.TryLock(ws, "watch"); !errors.Is(err, store.ErrLocked) || h.PID == 0 {
		t.Fatalf("TryLock = %v, %+v; want the lock still held by the child", err, h)
	}

	store.DeadHolderWait = time.Minute
	type result struct {
		lock *store.Lock
		err  error
	}
	got := make(chan result, 1)
	go func() {
		l, _, err := store.TryLock(ws, "watch")
		got <- result{l, err}
	}()
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("TryLock after the child let go: %v", r.err)
		}
		r.lock.Unlock()
	case <-time.After(effectWait):
		t.Fatal("TryLock never took the lock")
	}
}

// TestTryLock_AgentsInheritNoLock starts an agent while the lock is held and
// looks at every descriptor the agent has: none is the lock file.
func TestTryLock_AgentsInheritNoLock(t *testing.T) {
	w := newTestWS(t, "")
	lock, _, err := store.TryLock(w.chain().WS, "watch")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	p, err := proc.Start(proc.Spec{Argv: []string{agentBinary(t), "pidfile:" + w.path("agent.pid") + " waitfor:" + w.path("release")}, Dir: w.dir,
		Log: store.OpenTryLog(w.path("agent.log"), store.TryHeader{}, 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { p.Stop(); <-p.Done() }()
	w.waitPID("agent.pid")
	if fd := holding(t, p.PID, w.chain().WS.LockPath()); fd != "" {
		t.Errorf("the agent holds the lock file as descriptor %s", fd)
	}
	w.writeFile("release", "")
}

// holding returns which of process pid's descriptors is the file at path, or "".
func holding(t *testing.T, pid int, path string) string {
	t.Helper()
	var want syscall.Stat_t
	if err := syscall.Stat(path, &want); err != nil {
		t.Fatal(err)
	}
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	fds, err := os.ReadDir(dir)
	if err != nil || len(fds) == 0 {
		t.Fatalf("descriptors of %d: %v", pid, err)
	}
	for _, fd := range fds {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(dir, fd.Name()), &st); err == nil && st.Dev == want.Dev && st.Ino == want.Ino {
			return fd.Name()
		}
	}
	return ""
}

// A holder killed midway through an atomic write leaves its temporary file; the
// next holder removes it, and nothing else.
func TestTryLock_RemovesStrayTemps(t *testing.T) {
	w := newTestWS(t, "")
	ws := w.chain().WS
	stray := []string{".state.json5577006791947779410", ".stepseq/plans/.a.json8674665223082153551", ".stepseq/history/.20261201T101010Z-a.json42"}
	kept := []string{"state.json", ".state.jsonx", ".stepseq/plans/a.json", ".stepseq/plans/.notes", "other.json123", ".stepseq/history/20261201T101010Z-a.json"}
	for _, p := range append(slices.Clone(stray), kept...) {
		w.writeFile(p, "{}")
	}
	lock, _, err := store.TryLock(ws, "check")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	for _, p := range stray {
		if _, err := os.Stat(w.path(p)); err == nil {
			t.Errorf("%s is still there", p)
		}
	}
	for _, p := range kept {
		if _, err := os.Stat(w.path(p)); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
}
