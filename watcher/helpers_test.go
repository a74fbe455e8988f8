package watcher

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(burstEnv); dir != "" {
		n, _ := strconv.Atoi(os.Getenv(burstCountEnv))
		if err := writeBurst(dir, n); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		removeBigWorkspace()
		os.Exit(code)
	}))
}

// deadline bounds every wait for an effect.
const deadline = 5 * time.Second

// harness runs a Watcher on a temporary workspace and reads its batches.
type harness struct {
	t    *testing.T
	w    *Watcher
	root string
}

// watch starts a Watcher on a fresh workspace; the config's Root is ignored.
// Before it starts, setup may populate the workspace.
func watch(t *testing.T, cfg Config, setup ...func(h *harness)) *harness {
	t.Helper()
	return watchTuned(t, cfg, tuning{limit: maxPending}, setup...)
}

func watchTuned(t *testing.T, cfg Config, tu tuning, setup ...func(h *harness)) *harness {
	t.Helper()
	return watchIn(t, t.TempDir(), cfg, tu, setup...)
}

// watchIn is watchTuned on a given workspace directory.
func watchIn(t *testing.T, root string, cfg Config, tu tuning, setup ...func(h *harness)) *harness {
	t.Helper()
	h := &harness{t: t, root: root}
	for _, f := range setup {
		f(h)
	}
	cfg.Root = h.root
	w, err := start(cfg, tu)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.w = w
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		for err := range w.Errors() {
			t.Errorf("unexpected error from the watcher: %v", err)
		}
	})
	return h
}

func (h *harness) abs(rel string) string {
	return filepath.Join(h.root, filepath.FromSlash(rel))
}

// write creates rel with its parent directories, as `mkdir -p && echo >`.
func (h *harness) write(rel, content string) {
	h.t.Helper()
	name := h.abs(rel)
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// replace writes rel whole by a rename from a scratch file beside it, as the
// sidecar writes its state file: rel sees one event, not a create and a write.
func (h *harness) replace(rel, content string) {
	h.t.Helper()
	h.write(rel+".tmp", content)
	h.rename(rel+".tmp", rel)
}

func (h *harness) mkdir(rel string) {
	h.t.Helper()
	if err := os.MkdirAll(h.abs(rel), 0o755); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) rename(from, to string) {
	h.t.Helper()
	if err := os.Rename(h.abs(from), h.abs(to)); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) remove(rel string) {
	h.t.Helper()
	if err := os.RemoveAll(h.abs(rel)); err != nil {
		h.t.Fatal(err)
	}
}

// waitFor reads batches until every path in want has shown up, and returns
// the batches read. It fails the test after the deadline.
func (h *harness) waitFor(want ...string) []Batch {
	h.t.Helper()
	missing := make(map[string]bool, len(want))
	for _, p := range want {
		missing[p] = true
	}
	return h.readUntil(func(b Batch) bool {
		for _, p := range b.Paths {
			delete(missing, p)
		}
		return len(missing) == 0
	}, func() string { return "paths " + strings.Join(sortedKeys(missing), ", ") })
}

// waitRescan reads batches until one is a rescan, and returns the batches read.
func (h *harness) waitRescan() []Batch {
	h.t.Helper()
	return h.readUntil(func(b Batch) bool { return b.Rescan }, func() string { return "a rescan" })
}

// readUntil reads batches until done says so. It fails the test when no
// batch came for the deadline.
func (h *harness) readUntil(done func(Batch) bool, what func() string) []Batch {
	h.t.Helper()
	var got []Batch
	timeout := time.NewTimer(deadline)
	defer timeout.Stop()
	for {
		select {
		case b, ok := <-h.w.Batches():
			if !ok {
				h.t.Fatalf("batches closed while waiting for %s", what())
			}
			got = append(got, b)
			if done(b) {
				return got
			}
			timeout.Reset(deadline)
		case err := <-h.w.Errors():
			h.t.Errorf("watcher error: %v", err)
		case <-timeout.C:
			h.t.Fatalf("no %s after %v; got %s", what(), deadline, summary(got))
		}
	}
}

// summary describes batches briefly: a failed burst would print megabytes.
func summary(batches []Batch) string {
	paths := union(batches)
	rescan := slices.ContainsFunc(batches, func(b Batch) bool { return b.Rescan })
	if len(paths) > 10 {
		paths = append(paths[:10], "…")
	}
	return fmt.Sprintf("%d batches (rescan: %v) with %d paths %v", len(batches), rescan, len(union(batches)), paths)
}

// union lists every path of the batches, sorted.
func union(batches []Batch) []string {
	var all []string
	for _, b := range batches {
		all = append(all, b.Paths...)
	}
	slices.Sort(all)
	return slices.Compact(all)
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// bulkDir returns a fresh directory for tests that create thousands of
// files: on tmpfs when there is one, since creating a file on a VM's disk can
// cost half a millisecond of kernel time, which measures the disk, not the
// watcher.
func bulkDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp(bulkBase(), "watcher-test-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func bulkBase() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

// big is the benchmarks' 50,000-file workspace, made once per test binary
// and removed by TestMain.
var big struct {
	once sync.Once
	dir  string
	err  error
}

func removeBigWorkspace() {
	if big.dir != "" {
		os.RemoveAll(big.dir)
	}
}

// waitUntil polls cond until it holds or the deadline passes.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	timeout := time.NewTimer(deadline)
	defer timeout.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-timeout.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
