package watcher

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestFollow: fn runs once the watch is armed, so a file made in a folder made
// by that first call is seen; a batch names it; the wait fn asks for wakes it
// with no change; done ends the follow with fn's error, nil or not.
func TestFollow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var seen []string
	boom := errors.New("boom")
	err := Follow(ctx, Config{Root: dir, Paths: []string{"sub/a.txt"}}, func(b *Batch) (time.Duration, bool, error) {
		last := ""
		if len(seen) > 0 {
			last = seen[len(seen)-1]
		}
		switch {
		case last == "":
			seen = append(seen, "armed")
			if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
				return 0, true, err
			}
			return 0, false, os.WriteFile(filepath.Join(dir, "sub", "a.txt"), []byte("x"), 0o644)
		case last == "armed" && b != nil && slices.Contains(b.Paths, "sub/a.txt"):
			seen = append(seen, "changed")
			return time.Millisecond, false, nil
		case last == "changed" && b == nil:
			seen = append(seen, "woken")
			return 0, true, boom
		}
		return 0, false, nil // the folder's own batch
	})
	if !errors.Is(err, boom) {
		t.Errorf("Follow returned %v, want fn's error", err)
	}
	if want := []string{"armed", "changed", "woken"}; !slices.Equal(seen, want) {
		t.Errorf("calls %v, want %v", seen, want)
	}
}

// TestFollow_Ends: an ended context ends the follow with nil; a root that is
// not there is an error that says so.
func TestFollow_Ends(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := Follow(ctx, Config{Root: t.TempDir(), Paths: []string{"x"}}, func(*Batch) (time.Duration, bool, error) {
		calls++
		cancel()
		return 0, false, nil
	})
	if err != nil || calls != 1 {
		t.Errorf("after cancel: %v, %d calls; want nil after one call", err, calls)
	}
	err = Follow(context.Background(), Config{Root: filepath.Join(t.TempDir(), "gone"), Paths: []string{"x"}}, func(*Batch) (time.Duration, bool, error) {
		t.Error("fn called without a watch")
		return 0, true, nil
	})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing root: %v, want fs.ErrNotExist", err)
	}
}
