package fleet

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fullTmpfs mounts a small tmpfs at a new folder and fills it; writes there
// fail with ENOSPC until free is removed.
func fullTmpfs(t *testing.T) (dir, free string) {
	t.Helper()
	dir = t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=256k"); err != nil {
		t.Skipf("a full disk needs a tmpfs of its own: mount refused (%v); run as root, or where mounts are allowed", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	free = filepath.Join(dir, "filler")
	f, err := os.Create(free)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return dir, free
		}
	}
}

// TestWorker_FullWorkdir: a full workdir is said at the worker's start; one
// that fills up later blocks the run taken with the reason, never loses it.
func TestWorker_FullWorkdir(t *testing.T) {
	agentEnv(t)
	s := startServer(t)
	c := dial(t, s.ClientURL(), 1)
	dir, filler := fullTmpfs(t)
	_, err := NewWorker(context.Background(), c, WorkerOptions{Workdir: dir})
	if err == nil || !strings.Contains(err.Error(), "cannot be written") || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("err %v, want the workdir said full", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	w, err := NewWorker(context.Background(), c, WorkerOptions{Workdir: dir, Lease: 3 * time.Second, Name: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 300<<10) // more than the workdir holds, even packed: the clone fails
	_, _ = rand.Read(big)
	seed := t.TempDir()
	runGit(t, seed, "init", "--quiet", "--initial-branch=main")
	if err := os.WriteFile(filepath.Join(seed, "big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, seed, "add", ".")
	runGit(t, seed, "commit", "--quiet", "-m", "big")
	bare := filepath.Join(t.TempDir(), "big.git")
	runGit(t, seed, "clone", "--quiet", "--bare", seed, bare)
	submit(t, c, Submission{Repo: bare, Run: "big", Plan: planOf("big", "write:a.txt")})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	rec := waitEnded(t, c, "big")
	if rec.Status != StatusBlocked || !strings.Contains(rec.Reason, "is full") || !strings.Contains(rec.Reason, "clone") {
		t.Fatalf("record %s: %q, want blocked by the full workdir", rec.Status, rec.Reason)
	}
}
