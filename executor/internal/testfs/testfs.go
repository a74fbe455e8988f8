// Package testfs holds the file-system helpers the store's and the engine's
// tests share: FIFOs and links that a safe read must refuse, a tmpfs of a
// test's own and a disk filled to ENOSPC. It is for tests only.
package testfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Within runs fn and fails the test if it has not returned within wait: a read
// that blocks on a FIFO never returns at all.
func Within[T any](t *testing.T, wait time.Duration, what string, fn func() T) T {
	t.Helper()
	got := make(chan T, 1)
	go func() { got <- fn() }()
	select {
	case v := <-got:
		return v
	case <-time.After(wait):
		t.Fatalf("%s blocked", what)
		panic("unreachable")
	}
}

// Mkfifo makes a FIFO at path, and its folder.
func Mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Symlink makes link point at target, and link's folder.
func Symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// OpenRoot opens dir as an os.Root closed with the test.
func OpenRoot(t *testing.T, dir string) *os.Root {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

// PasswdBytes is what a link to /etc/passwd must never leak: its first line.
func PasswdBytes(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("/etc/passwd")
	if err != nil || len(data) == 0 {
		t.Fatalf("the test needs /etc/passwd: %v", err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	return line
}

// FillDisk writes a file in dir until the file system is full, and returns a
// function that frees the space.
func FillDisk(t *testing.T, dir string) (free func()) {
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
