package watcher

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestWatcher_NewRejects(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"missing root", Config{Root: filepath.Join(dir, "nope")}, "no such file"},
		{"root is a file", Config{Root: file}, "not a directory"},
		{"absolute path", Config{Root: dir, Paths: []string{"/etc/passwd"}}, "relative"},
		{"escaping path", Config{Root: dir, Paths: []string{"a/../../x"}}, "leaves the workspace"},
		{"escaping tree", Config{Root: dir, Trees: []string{".."}}, "leaves the workspace"},
		{"negative settle", Config{Root: dir, Settle: -time.Second}, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := New(tt.cfg)
			if err == nil {
				w.Close()
				t.Fatalf("New succeeded, want an error with %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want %q in it", err, tt.want)
			}
		})
	}
}

// TestWatcher_Paths covers named paths: existing or not, files or
// directories, with missing parents created just before the file.
func TestWatcher_Paths(t *testing.T) {
	tests := []struct {
		name  string
		paths []string
		setup func(h *harness)
		do    func(h *harness)
		want  []string
	}{
		{
			name:  "file in the root",
			paths: []string{"state.json"},
			do:    func(h *harness) { h.write("state.json", "{}") },
			want:  []string{"state.json"},
		},
		{
			name:  "existing file rewritten",
			paths: []string{"plans/a.yaml"},
			setup: func(h *harness) { h.write("plans/a.yaml", "v1") },
			do:    func(h *harness) { h.write("plans/a.yaml", "v2") },
			want:  []string{"plans/a.yaml"},
		},
		{
			name:  "missing parents made just before the file",
			paths: []string{"a/b/c/f"},
			do:    func(h *harness) { h.write("a/b/c/f", "x") },
			want:  []string{"a/b/c/f"},
		},
		{
			name:  "missing directory path reports its entries",
			paths: []string{".stepseq/triggers"},
			do:    func(h *harness) { h.write(".stepseq/triggers/build", "") },
			want:  []string{".stepseq/triggers", ".stepseq/triggers/build"},
		},
		{
			name:  "existing directory path reports its entries",
			paths: []string{"out"},
			setup: func(h *harness) { h.mkdir("out") },
			do:    func(h *harness) { h.write("out/report.md", "done") },
			want:  []string{"out/report.md"},
		},
		{
			name:  "removal",
			paths: []string{"out/x"},
			setup: func(h *harness) { h.write("out/x", "") },
			do:    func(h *harness) { h.remove("out/x") },
			want:  []string{"out/x"},
		},
		{
			name:  "parent replaced by a file then a directory",
			paths: []string{"a/f"},
			setup: func(h *harness) { h.write("a", "a file") },
			do: func(h *harness) {
				h.remove("a")
				h.write("a/f", "")
			},
			want: []string{"a/f"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			setup := func(*harness) {}
			if tt.setup != nil {
				setup = tt.setup
			}
			h := watch(t, Config{Paths: tt.paths}, setup)
			tt.do(h)
			h.waitFor(tt.want...)
		})
	}
}

// TestWatcher_IgnoresSiblings: a watch on a parent sees its siblings too;
// only the named paths may be reported.
func TestWatcher_IgnoresSiblings(t *testing.T) {
	h := watch(t, Config{Paths: []string{"state.json", "out/a/want"}})
	h.write("other.txt", "")
	h.write("out/a/other", "")
	h.write("out/b/deeper", "")
	h.write("out/a/want", "")
	h.write("state.json", "{}")
	got := union(h.waitFor("state.json", "out/a/want"))
	if want := []string{"out/a/want", "state.json"}; !slices.Equal(got, want) {
		t.Fatalf("paths %v, want only %v", got, want)
	}
	// Watches: the root, out, out/a.
	if n := h.w.Stats().Watches; n != 3 {
		t.Errorf("Stats().Watches = %d, want 3 (%v)", n, h.w.fsw.WatchList())
	}
}

// TestWatcher_MkdirThenFile repeats `mkdir -p a/b/c && touch a/b/c/f` so
// that the race between a directory's creation and its watch is exercised,
// for named paths and for trees.
func TestWatcher_MkdirThenFile(t *testing.T) {
	const rounds = 30
	var paths []string
	for i := range rounds {
		paths = append(paths, fmt.Sprintf("p%d/b/c/f", i))
	}
	h := watch(t, Config{Paths: paths, Trees: []string{"src"}, Settle: 5 * time.Millisecond}, func(h *harness) { h.mkdir("src") })
	for i := range rounds {
		tree := fmt.Sprintf("src/t%d/b/c/f", i)
		h.write(paths[i], "")
		h.write(tree, "")
		h.waitFor(paths[i], tree)
	}
}

func TestWatcher_Trees(t *testing.T) {
	tests := []struct {
		name    string
		trees   []string
		writes  []string // in order; the last one is awaited
		want    []string // reported, among the writes
		notWant []string
	}{
		{
			name:   "deep files",
			trees:  []string{"src"},
			writes: []string{"src/a/b/c/d/e.go", "src/f.go"},
			want:   []string{"src/a", "src/a/b/c/d/e.go", "src/f.go"},
		},
		{
			name:    "skips .git and node_modules",
			trees:   []string{"src"},
			writes:  []string{"src/.git/HEAD", "src/web/node_modules/x/y.js", "src/web/app.js"},
			want:    []string{"src/web/app.js"},
			notWant: []string{"src/.git", "src/.git/HEAD", "src/web/node_modules", "src/web/node_modules/x/y.js"},
		},
		{
			name:   "a tree inside node_modules is watched",
			trees:  []string{"node_modules/pkg"},
			writes: []string{"node_modules/pkg/node_modules/dep/index.js"},
			want:   []string{"node_modules/pkg/node_modules/dep/index.js"},
		},
		{
			name:    "whole root",
			trees:   []string{"."},
			writes:  []string{".git/config", "notes/x/y.md", "z.md"},
			want:    []string{"notes/x/y.md", "z.md"},
			notWant: []string{".git", ".git/config"},
		},
		{
			name:    "outside the tree",
			trees:   []string{"docs"},
			writes:  []string{"src/main.go", "docs/a.md"},
			want:    []string{"docs/a.md"},
			notWant: []string{"src", "src/main.go"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := watch(t, Config{Trees: tt.trees})
			for _, w := range tt.writes {
				h.write(w, "x")
			}
			got := union(h.waitFor(tt.want...))
			for _, p := range tt.notWant {
				if slices.Contains(got, p) {
					t.Errorf("%s reported: %v", p, got)
				}
			}
		})
	}
}

// TestWatcher_TreeSkipsWatches: skipped directories cost no watch.
func TestWatcher_TreeSkipsWatches(t *testing.T) {
	h := watch(t, Config{Trees: []string{""}}, func(h *harness) {
		for i := range 20 {
			h.mkdir(fmt.Sprintf(".git/objects/%02x", i))
			h.mkdir(fmt.Sprintf("node_modules/m%d/lib", i))
		}
		h.mkdir("src/pkg")
	})
	for _, d := range h.w.fsw.WatchList() {
		if strings.Contains(d, ".git") || strings.Contains(d, "node_modules") {
			t.Errorf("watching %s", d)
		}
	}
	if n := h.w.Stats().Watches; n != 3 { // root, src, src/pkg
		t.Errorf("Stats().Watches = %d, want 3", n)
	}
}

// TestWatcher_DirRenamed: after a rename, the old watches are gone and the
// new location reports under its new name.
func TestWatcher_DirRenamed(t *testing.T) {
	t.Run("inside a tree", func(t *testing.T) {
		t.Parallel()
		h := watch(t, Config{Trees: []string{"src"}}, func(h *harness) { h.mkdir("src/old/sub/deep") })
		h.rename("src/old", "src/new")
		h.waitFor("src/old", "src/new")
		h.write("src/new/sub/deep/f", "")
		got := union(h.waitFor("src/new/sub/deep/f"))
		if slices.Contains(got, "src/old/sub/deep/f") {
			t.Errorf("reported under the old name: %v", got)
		}
		for _, d := range h.w.fsw.WatchList() {
			if strings.Contains(d, "old") {
				t.Errorf("still watching %s", d)
			}
		}
		if n, want := h.w.Stats().Watches, 5; n != want { // root, src, new, sub, deep
			t.Errorf("Stats().Watches = %d, want %d: %v", n, want, h.w.fsw.WatchList())
		}
	})
	t.Run("out of the tree", func(t *testing.T) {
		t.Parallel()
		h := watch(t, Config{Trees: []string{"src"}}, func(h *harness) { h.mkdir("src/d/e") })
		h.rename("src/d", "elsewhere")
		h.write("elsewhere/e/f", "")
		h.write("src/g", "")
		got := union(h.waitFor("src/d", "src/g"))
		if slices.ContainsFunc(got, func(p string) bool { return strings.HasPrefix(p, "src/d/") }) {
			t.Errorf("a moved-away directory still reports: %v", got)
		}
	})
	t.Run("on the way to a path", func(t *testing.T) {
		t.Parallel()
		h := watch(t, Config{Paths: []string{"a/b/c/f"}}, func(h *harness) { h.mkdir("a/b/c") })
		h.rename("a/b", "a/moved")
		h.write("a/moved/c/f", "") // not the path any more
		h.write("a/b/c/f", "")     // the path, in a new directory
		got := union(h.waitFor("a/b/c/f"))
		if len(got) != 1 {
			t.Errorf("got %v, want only a/b/c/f", got)
		}
	})
}

// TestWatcher_RootRecreated: the workspace removed (or moved away) and made
// again yields a rescan, and changes are reported again afterwards.
func TestWatcher_RootRecreated(t *testing.T) {
	tests := []struct {
		name string
		gone func(h *harness)
	}{
		{"removed", func(h *harness) { h.remove("") }},
		{"moved away", func(h *harness) {
			if err := os.Rename(h.root, h.root+".old"); err != nil {
				h.t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := watch(t, Config{Paths: []string{"state.json"}, Trees: []string{"src"}}, func(h *harness) {
				h.write("state.json", "{}")
				h.mkdir("src/pkg")
			})
			tt.gone(h)
			h.write("src/pkg/a.go", "")
			h.waitRescan()
			h.write("state.json", "{}")
			h.write("src/pkg/b.go", "")
			h.waitFor("state.json", "src/pkg/b.go")
			if n := h.w.Stats().Watches; n != 3 { // root, src, src/pkg
				t.Errorf("Stats().Watches = %d, want 3: %v", n, h.w.fsw.WatchList())
			}
		})
	}
}

func TestWatcher_Update(t *testing.T) {
	h := watch(t, Config{Paths: []string{"a"}, Trees: []string{"t1"}}, func(h *harness) { h.mkdir("t1/x") })
	if err := h.w.Update([]string{"b/c"}, []string{"t2"}); err != nil {
		t.Fatal(err)
	}
	if err := h.w.Update([]string{"../x"}, nil); err == nil {
		t.Error("Update accepted a path outside the workspace")
	}
	h.write("a", "")
	h.write("t1/x/f", "")
	h.write("t2/y/f", "")
	h.write("b/c", "")
	got := union(h.waitFor("b/c", "t2/y/f"))
	if slices.Contains(got, "a") || slices.Contains(got, "t1/x/f") {
		t.Errorf("old paths still reported: %v", got)
	}
	if slices.ContainsFunc(h.w.fsw.WatchList(), func(d string) bool { return strings.Contains(d, "t1") }) {
		t.Errorf("t1 still watched: %v", h.w.fsw.WatchList())
	}
}

// TestWatcher_UpdatePaths: with the same trees, an update looks only at the paths
// added and removed: a named folder added is watched at once (a report dropped
// in it right after is seen), and the watches only a removed path needed go.
func TestWatcher_UpdatePaths(t *testing.T) {
	h := watch(t, Config{Paths: []string{"a/x", "b/f"}}, func(h *harness) { h.mkdir("a/x"); h.mkdir("b"); h.mkdir("c/d") })
	if err := h.w.Update([]string{"b/f", "c/d"}, nil); err != nil {
		t.Fatal(err)
	}
	h.write("c/d/report.json", "")
	h.write("a/x/old", "")
	got := union(h.waitFor("c/d/report.json"))
	if slices.Contains(got, "a/x/old") {
		t.Errorf("a removed path still reported: %v", got)
	}
	if n := h.w.Stats().Watches; n != 4 { // root, b, c, c/d
		t.Errorf("Stats().Watches = %d, want 4: %v", n, h.w.fsw.WatchList())
	}
	if err := h.w.Update([]string{"a/x", "b/f", "c/d"}, nil); err != nil {
		t.Fatal(err)
	}
	h.write("a/x/new", "")
	h.write("b/f", "")
	h.waitFor("a/x/new", "b/f")
	if n := h.w.Stats().Watches; n != 6 { // root, a, a/x, b, c, c/d
		t.Errorf("Stats().Watches = %d, want 6: %v", n, h.w.fsw.WatchList())
	}
}

// TestWatcher_Adjust: Adjust changes the named paths as Update does with the
// whole list, looking at nothing else: a folder added is watched at once, the
// watches only a removed path needed go, the trees stay, and a path added twice
// or removed while not named changes nothing.
func TestWatcher_Adjust(t *testing.T) {
	h := watch(t, Config{Paths: []string{"a/x", "b/f"}, Trees: []string{"t"}}, func(h *harness) {
		h.mkdir("a/x")
		h.mkdir("b")
		h.mkdir("c/d")
		h.mkdir("t/u")
	})
	if err := h.w.Adjust([]string{"c/d", "./b/f"}, []string{"a/x", "never/named"}); err != nil {
		t.Fatal(err)
	}
	h.write("c/d/report.json", "")
	h.write("a/x/old", "")
	h.write("t/u/f", "")
	got := union(h.waitFor("c/d/report.json", "t/u/f"))
	if slices.Contains(got, "a/x/old") {
		t.Errorf("a removed path still reported: %v", got)
	}
	if n := h.w.Stats().Watches; n != 6 { // root, b, c, c/d, t, t/u
		t.Errorf("Stats().Watches = %d, want 6: %v", n, h.w.fsw.WatchList())
	}
	if err := h.w.Adjust([]string{"a/x"}, []string{"c/d"}); err != nil {
		t.Fatal(err)
	}
	h.write("a/x/new", "")
	h.write("b/f", "")
	h.write("c/d/late.json", "")
	got = union(h.waitFor("a/x/new", "b/f"))
	if slices.Contains(got, "c/d/late.json") {
		t.Errorf("a removed folder still reported: %v", got)
	}
	if n := h.w.Stats().Watches; n != 6 { // root, a, a/x, b, t, t/u
		t.Errorf("Stats().Watches = %d, want 6: %v", n, h.w.fsw.WatchList())
	}
	if err := h.w.Adjust([]string{"../out"}, nil); err == nil {
		t.Error("Adjust accepted a path outside the workspace")
	}
}

// TestWatcher_AdjustPolling: a polling watcher takes Adjust as it takes Update.
func TestWatcher_AdjustPolling(t *testing.T) {
	h := watch(t, Config{Paths: []string{"a"}, Poll: 10 * time.Millisecond})
	if err := h.w.Adjust([]string{"b"}, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	h.write("a", "")
	h.write("b", "")
	if got := union(h.waitFor("b")); slices.Contains(got, "a") {
		t.Errorf("a removed path still reported: %v", got)
	}
}

// TestWatcher_UpdateTreeOverPath: a directory already watched on the way to
// a path still gets its whole subtree watched when it becomes a tree.
func TestWatcher_UpdateTreeOverPath(t *testing.T) {
	h := watch(t, Config{Paths: []string{"src/x"}}, func(h *harness) { h.mkdir("src/a/b") })
	if err := h.w.Update(nil, []string{"src"}); err != nil {
		t.Fatal(err)
	}
	h.write("src/a/b/f", "")
	h.waitFor("src/a/b/f")
	if err := h.w.Update([]string{"src/x"}, nil); err != nil {
		t.Fatal(err)
	}
	if n := h.w.Stats().Watches; n != 2 { // root, src
		t.Errorf("Stats().Watches = %d after the tree went, want 2: %v", n, h.w.fsw.WatchList())
	}
	if err := h.w.Update(nil, []string{"src"}); err != nil {
		t.Fatal(err)
	}
	h.write("src/a/b/g", "")
	h.waitFor("src/a/b/g")
}

func TestWatcher_Close(t *testing.T) {
	w, err := New(Config{Root: t.TempDir(), Paths: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, ok := <-w.Batches(); ok {
		t.Error("Batches not closed")
	}
	if _, ok := <-w.Errors(); ok {
		t.Error("Errors not closed")
	}
	if err := w.Update([]string{"y"}, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Update after Close: %v, want ErrClosed", err)
	}
}

// TestWatcher_Stats: events and batches are counted.
func TestWatcher_Stats(t *testing.T) {
	h := watch(t, Config{Paths: []string{"f"}})
	h.write("f", "x")
	h.waitFor("f")
	// The count follows the hand-over.
	waitUntil(t, "a batch counted", func() bool { return h.w.Stats().Batches > 0 })
	st := h.w.Stats()
	if st.Events == 0 || st.Batches == 0 || st.Watches != 1 || st.Overflows != 0 {
		t.Errorf("Stats() = %+v", st)
	}
}

// TestWatcher_MoveThenDelete: directories moved and deleted at once make
// fsnotify report errors while it holds its lock; the watcher must go on.
func TestWatcher_MoveThenDelete(t *testing.T) {
	h := watch(t, Config{Trees: []string{"src"}}, func(h *harness) { h.mkdir("src") })
	for i := range 100 {
		h.mkdir(fmt.Sprintf("src/d%d/sub", i))
	}
	h.waitFor("src/d99/sub")
	for i := range 100 {
		h.rename(fmt.Sprintf("src/d%d", i), fmt.Sprintf("src/x%d", i))
		h.remove(fmt.Sprintf("src/x%d", i))
	}
	h.write("src/sentinel", "")
	h.waitFor("src/sentinel")
	if n := h.w.Stats().Watches; n != 2 { // root, src
		t.Errorf("Stats().Watches = %d, want 2: %v", n, h.w.fsw.WatchList())
	}
}
