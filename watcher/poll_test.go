package watcher

import (
	"slices"
	"testing"
	"time"
)

func TestWatcher_Poll(t *testing.T) {
	h := watch(t, Config{
		Paths: []string{"state.json", "out"},
		Trees: []string{"src"},
		Poll:  5 * time.Millisecond,
	}, func(h *harness) { h.write("src/old.go", "") })
	if n := h.w.Stats().Watches; n != 0 {
		t.Errorf("Stats().Watches = %d while polling", n)
	}
	steps := []struct {
		name    string
		do      func()
		want    []string
		notWant []string
	}{
		{"file written", func() { h.write("state.json", "{}") }, []string{"state.json"}, nil},
		{"file rewritten", func() { h.write("state.json", `{"a":1}`) }, []string{"state.json"}, nil},
		{"directory path and its entries", func() { h.write("out/x", "") }, []string{"out", "out/x"}, nil},
		{"deep in a tree", func() { h.write("src/a/b/f.go", "") }, []string{"src/a", "src/a/b/f.go"}, nil},
		{"removed", func() { h.remove("src/old.go") }, []string{"src/old.go"}, nil},
		{"skipped and scratch names", func() {
			h.write("src/.git/HEAD", "")
			h.write("src/.f.go.swp", "")
			h.write("other", "")
			h.write("src/y.go", "")
		}, []string{"src/y.go"}, []string{"src/.git", "src/.git/HEAD", "src/.f.go.swp", "other"}},
	}
	for _, s := range steps {
		s.do()
		got := union(h.waitFor(s.want...))
		for _, p := range s.notWant {
			if slices.Contains(got, p) {
				t.Errorf("%s: %s reported", s.name, p)
			}
		}
	}

	// The root is moved away whole, so that no scan sees it half removed: a
	// directory removed and made again may get the inode of the old one, and
	// a poller cannot tell them apart once it missed the moment between.
	h.rename("", "../moved-away")
	h.waitFor("state.json", "src/y.go") // seen gone
	h.mkdir("")
	h.waitRescan()
	h.write("state.json", "{}")
	h.waitFor("state.json")
	if st := h.w.Stats(); st.Events == 0 {
		t.Errorf("Stats() = %+v", st)
	}
}

func TestWatcher_PollUpdate(t *testing.T) {
	h := watch(t, Config{Paths: []string{"a"}, Poll: 5 * time.Millisecond})
	if err := h.w.Update([]string{"b"}, nil); err != nil {
		t.Fatal(err)
	}
	h.write("a", "")
	h.write("b", "")
	if got := union(h.waitFor("b")); slices.Contains(got, "a") {
		t.Errorf("a reported after Update: %v", got)
	}
}
