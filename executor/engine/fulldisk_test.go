package engine

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// tmpfsWorkspace is a test workspace on a tmpfs of size bytes of its own, so that
// the test can fill it. It skips, saying why, where no tmpfs can be mounted.
func tmpfsWorkspace(t *testing.T, size string) *testWS {
	t.Helper()
	w := newTestWS(t, "")
	if err := mountTmpfs(t, w.dir, "size="+size+",mode=0755"); err != nil {
		t.Skipf("a full disk needs a tmpfs of its own: mount refused (%v); run as root, or where mounts are allowed", err)
	}
	return w
}

// fillDisk writes a file in dir until the file system is full, and returns a
// function that frees the space.
func fillDisk(t *testing.T, dir string) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	f.Close()
	return func() {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}
