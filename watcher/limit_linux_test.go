package watcher

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestWatchError(t *testing.T) {
	err := watchError("/ws/src", syscall.ENOSPC)
	if !errors.Is(err, ErrWatchLimit) || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("%v: does not match ErrWatchLimit and ENOSPC", err)
	}
	for _, want := range []string{"/ws/src", "fs.inotify.max_user_watches", "sysctl fs.inotify.max_user_watches=524288"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %q", err, want)
		}
	}
	if err := watchError("/ws/src", syscall.EACCES); errors.Is(err, ErrWatchLimit) {
		t.Errorf("%v matches ErrWatchLimit", err)
	}
	if err := initError(syscall.EMFILE); !errors.Is(err, ErrWatchLimit) || !strings.Contains(err.Error(), "max_user_instances") {
		t.Errorf("initError(EMFILE) = %v", err)
	}
}

const limitEnv = "WATCHER_TEST_IN_USERNS"

// TestWatcher_WatchLimit runs out of inotify watches, and of inotify
// instances, for real. The limits are per user namespace, so the test runs
// again in a namespace of its own where it lowers them (watches to 4,
// instances to 0) without touching anyone else's.
func TestWatcher_WatchLimit(t *testing.T) {
	if os.Getenv(limitEnv) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWatcher_WatchLimit$", "-test.v")
		cmd.Env = append(os.Environ(), limitEnv+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		}
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		switch {
		case err != nil && !errors.As(err, &exit):
			t.Skipf("no user namespace to lower the watch limit in: %v", err)
		case err != nil:
			t.Fatalf("in a user namespace: %v\n%s", err, out)
		case strings.Contains(string(out), "--- SKIP"):
			t.Skipf("skipped in the user namespace:\n%s", out)
		}
		for _, sub := range []string{"at_start", "running", "no_instance"} {
			if !strings.Contains(string(out), "--- PASS: TestWatcher_WatchLimit/"+sub) {
				t.Errorf("%s did not pass in the user namespace:\n%s", sub, out)
			}
		}
		return
	}

	if err := os.WriteFile("/proc/sys/user/max_inotify_watches", []byte("4"), 0); err != nil {
		t.Skipf("cannot lower the watch limit: %v", err)
	}
	t.Run("at start", func(t *testing.T) {
		root := t.TempDir()
		for _, d := range []string{"a", "b", "c", "d", "e"} {
			if err := os.MkdirAll(root+"/src/"+d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		// Past the limit the watcher starts all the same, says so, polls, and
		// arms everything once the limit is raised.
		w, err := New(Config{Root: root, Trees: []string{"src"}})
		if err != nil {
			t.Fatalf("New: %v, want a watcher that polls what it cannot watch", err)
		}
		defer w.Close()
		select {
		case err := <-w.Errors():
			if !errors.Is(err, ErrWatchLimit) || !strings.Contains(err.Error(), "sysctl fs.inotify.max_user_watches=524288") {
				t.Fatalf("error %v, want ErrWatchLimit with advice", err)
			}
		case <-time.After(deadline):
			t.Fatal("no ErrWatchLimit on Errors")
		}
		if !w.Stats().Limited {
			t.Fatal("Stats().Limited is false past the limit")
		}
		if err := os.WriteFile(root+"/src/e/x.txt", nil, 0o644); err != nil {
			t.Fatal(err)
		}
		timeout := time.After(deadline)
		for seen := false; !seen; {
			select {
			case b := <-w.Batches():
				seen = slices.Contains(b.Paths, "src/e/x.txt") || b.Rescan
			case <-timeout:
				t.Fatal("a file in a folder past the limit was never delivered")
			}
		}
		if err := os.WriteFile("/proc/sys/user/max_inotify_watches", []byte("100"), 0); err != nil {
			t.Fatal(err)
		}
		for end := time.Now().Add(2 * limitRetryMax); w.Stats().Limited; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatal("raising the limit did not arm the watches again")
			}
		}
		if err := os.WriteFile("/proc/sys/user/max_inotify_watches", []byte("4"), 0); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("running", func(t *testing.T) {
		root := t.TempDir()
		if err := os.Mkdir(root+"/src", 0o755); err != nil {
			t.Fatal(err)
		}
		w, err := New(Config{Root: root, Trees: []string{"src"}})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		for _, d := range []string{"a", "b", "c"} {
			if err := os.Mkdir(root+"/src/"+d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		timeout := time.After(deadline)
		for {
			select {
			case err := <-w.Errors():
				if errors.Is(err, ErrWatchLimit) {
					return
				}
				t.Fatalf("error %v, want ErrWatchLimit", err)
			case <-w.Batches():
			case <-timeout:
				t.Fatal("no ErrWatchLimit on Errors")
			}
		}
	})
	t.Run("no instance", noInstance)
}

// noInstance runs in TestWatcher_WatchLimit's user namespace: with every inotify
// instance taken, the watcher polls, as it does past the watch limit, and takes
// an instance once one can be had.
func noInstance(t *testing.T) {
	setLimit(t, "max_inotify_watches", "100")
	setLimit(t, "max_inotify_instances", "0")
	defer setLimit(t, "max_inotify_instances", "128")
	root := t.TempDir()
	if err := os.Mkdir(root+"/src", 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := start(Config{Root: root, Trees: []string{"src"}},
		tuning{limit: maxPending, limitPoll: 20 * time.Millisecond, retryFirst: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("New: %v, want a watcher that polls", err)
	}
	defer w.Close()
	select {
	case err := <-w.Errors():
		if !errors.Is(err, ErrWatchLimit) || !errors.Is(err, syscall.EMFILE) || !strings.Contains(err.Error(), "max_user_instances") {
			t.Fatalf("error %v, want ErrWatchLimit (EMFILE) naming max_user_instances", err)
		}
	case <-time.After(deadline):
		t.Fatal("no ErrWatchLimit on Errors")
	}
	if s := w.Stats(); !s.Limited || s.Watches != 0 {
		t.Fatalf("Stats() = %+v, want Limited with no watch", s)
	}
	writeAndWait(t, w, root, "src/polled.txt")
	if err := w.Update([]string{"notes.txt"}, []string{"src"}); err != nil {
		t.Fatalf("Update with no instance: %v", err)
	}
	writeAndWait(t, w, root, "notes.txt")
	setLimit(t, "max_inotify_instances", "128")
	for end := time.Now().Add(deadline); w.Stats().Limited || w.Stats().Watches == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("an instance to be had did not end the polling: %+v", w.Stats())
		}
	}
	writeAndWait(t, w, root, "src/watched.txt")
}

// setLimit writes one of the user namespace's limits, /proc/sys/user/NAME.
func setLimit(t *testing.T, name, v string) {
	t.Helper()
	if err := os.WriteFile("/proc/sys/user/"+name, []byte(v), 0); err != nil {
		t.Fatal(err)
	}
}

// writeAndWait writes rel under root and waits for a batch that names it.
func writeAndWait(t *testing.T, w *Watcher, root, rel string) {
	t.Helper()
	if err := os.WriteFile(root+"/"+rel, []byte(rel), 0o644); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(deadline)
	for {
		select {
		case b := <-w.Batches():
			if slices.Contains(b.Paths, rel) {
				return
			}
		case <-timeout:
			t.Fatalf("%s was never delivered", rel)
		}
	}
}
