package store

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLockHeld: the lock is read without being taken, from a descriptor opened
// read-only: free with no lock file, held with its holder while a stepseq has
// it, free again once released.
func TestLockHeld(t *testing.T) {
	w := Workspace{Dir: t.TempDir()}
	w.State = filepath.Join(w.Dir, "state.json")
	if h, held, err := LockHeld(w); err != nil || held || h != nil {
		t.Fatalf("no lock file: %v %v %v, want free", h, held, err)
	}
	l, _, err := TryLock(w, "watch")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(w.LockPath(), 0o444); err != nil {
		t.Fatal(err)
	}
	h, held, err := LockHeld(w)
	if err != nil || !held || h == nil || h.Kind != "watch" || h.PID != os.Getpid() {
		t.Fatalf("held: %+v %v %v, want watch by this process", h, held, err)
	}
	l.Unlock()
	if _, held, err := LockHeld(w); err != nil || held {
		t.Fatalf("released: %v %v, want free", held, err)
	}
	if l, _, err := TryLock(w, "watch"); err != nil {
		t.Fatalf("the probe kept the lock: %v", err)
	} else {
		l.Unlock()
	}
}
