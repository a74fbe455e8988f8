package watcher

import (
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// cappedNotifier is the kernel's notifier with a watch limit of its own, which
// the test lowers and raises: inotify_add_watch fails with ENOSPC past it, as it
// does past fs.inotify.max_user_watches.
type cappedNotifier struct {
	notifier
	max atomic.Int64

	mu   sync.Mutex
	held map[string]bool
}

func (n *cappedNotifier) Add(dir string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.held[dir] && int64(len(n.held)) >= n.max.Load() {
		return &os.PathError{Op: "inotify_add_watch", Path: dir, Err: syscall.ENOSPC}
	}
	if err := n.notifier.Add(dir); err != nil {
		return err
	}
	n.held[dir] = true
	return nil
}

func (n *cappedNotifier) Remove(dir string) error {
	n.mu.Lock()
	delete(n.held, dir)
	n.mu.Unlock()
	return n.notifier.Remove(dir)
}

// TestWatcher_WatchLimitPolledAndRetried: with the watch limit hit under a tree,
// the watcher says so once with the fix, polls so that a change in a folder it
// could not watch is still delivered, and retries arming until the limit is
// raised; then it watches everything again without a restart.
func TestWatcher_WatchLimitPolledAndRetried(t *testing.T) {
	capped := &cappedNotifier{held: map[string]bool{}}
	capped.max.Store(4) // the root, src and two of its five folders
	var limits []error
	var limitsMu sync.Mutex
	tu := tuning{limit: maxPending, limitPoll: 20 * time.Millisecond, retryFirst: 20 * time.Millisecond,
		notifier: func() (notifier, error) {
			n, err := newNotifier()
			capped.notifier = n
			return capped, err
		}}
	cfg := Config{Trees: []string{"src"}, OnLimit: func(err error) {
		limitsMu.Lock()
		limits = append(limits, err)
		limitsMu.Unlock()
	}}
	h := watchTuned(t, cfg, tu, func(h *harness) {
		for _, d := range []string{"a", "b", "c", "d", "e"} {
			h.mkdir("src/" + d)
		}
	})
	select {
	case err := <-h.w.Errors():
		if !errors.Is(err, ErrWatchLimit) || !strings.Contains(err.Error(), "fs.inotify.max_user_watches") {
			t.Fatalf("error %v, want ErrWatchLimit naming fs.inotify.max_user_watches", err)
		}
	case <-time.After(deadline):
		t.Fatal("no ErrWatchLimit on Errors")
	}
	if !h.w.Stats().Limited {
		t.Error("Stats().Limited is false with folders unwatched")
	}
	// Every folder is watched or polled: a file in each is delivered.
	for _, d := range []string{"a", "b", "c", "d", "e"} {
		h.write("src/"+d+"/x.txt", "x")
	}
	h.waitFor("src/a/x.txt", "src/b/x.txt", "src/c/x.txt", "src/d/x.txt", "src/e/x.txt")

	// The limit is raised: the retries arm every folder, polling stops.
	capped.max.Store(1000)
	for end := time.Now().Add(deadline); h.w.Stats().Limited; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the watches were never armed again")
		}
	}
	if got := h.w.Stats().Watches; got != 7 {
		t.Errorf("%d watches, want 7 (root, src and its five folders)", got)
	}
	h.write("src/e/y.txt", "y")
	h.waitFor("src/e/y.txt")
	limitsMu.Lock()
	defer limitsMu.Unlock()
	if len(limits) != 2 || !errors.Is(limits[0], ErrWatchLimit) || limits[1] != nil {
		t.Errorf("OnLimit was told %v, want the limit, then nil", limits)
	}
	select {
	case err := <-h.w.Errors():
		t.Errorf("a second error: %v", err)
	default:
	}
}
