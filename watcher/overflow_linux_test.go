package watcher

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestWatcher_Overflow overflows the kernel's event queue for real: the
// watcher's loop is held back while more events happen than the queue,
// the notifier and its read buffer hold together.
func TestWatcher_Overflow(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	if err != nil {
		t.Skip(err)
	}
	queue, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || queue > 100_000 {
		t.Skipf("max_queued_events is %s: too many files to create", b)
	}
	hold := make(chan struct{})
	h := watchIn(t, bulkDir(t), Config{Trees: []string{"src"}}, tuning{limit: maxPending, hold: hold},
		func(h *harness) { h.mkdir("src/sub") })
	// Writes that alternate between two files make one event each (inotify
	// merges an event only into an identical one just before it); the
	// notifier reads up to eventSlices+1 reads of 4096 events ahead.
	n := queue + (eventSlices+1)*4096 + 1000
	var files [2]*os.File
	for i := range files {
		f, err := os.Create(filepath.Join(h.abs("src/sub"), fmt.Sprintf("f%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files[i] = f
	}
	for i := range n {
		if _, err := files[i%2].Write([]byte{'x'}); err != nil {
			t.Fatal(err)
		}
	}
	h.mkdir("src/sub/unseen") // created while events were being lost
	close(hold)
	h.waitRescan()
	if st := h.w.Stats(); st.Overflows == 0 {
		t.Errorf("Stats() = %+v, want an overflow counted", st)
	}
	// The watch set was repaired: the directory made during the overflow is watched.
	h.write("src/sub/unseen/after", "")
	h.waitFor("src/sub/unseen/after")
}
