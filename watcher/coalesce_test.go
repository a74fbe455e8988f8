package watcher

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCoalescer drives the coalescing rules with made-up times.
func TestCoalescer(t *testing.T) {
	const settle = 20 * time.Millisecond
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

	t.Run("the first change after a quiet window is due at once", func(t *testing.T) {
		c := newCoalescer(settle, 100)
		defer c.stop()
		c.add("a", at(0), false)
		if !c.leading() || c.C() != nil {
			t.Fatal("the first change is not due at once, or waits on the timer")
		}
		c.add("b", at(0), false) // came in beside it
		c.flushLead()
		if b, ready := c.batch(); !ready || !slices.Equal(sorted(b.Paths), []string{"a", "b"}) {
			t.Fatalf("batch() = %+v, %v", b, ready)
		}
		c.sent()
		// What follows within the window is coalesced.
		c.add("c", at(5), false)
		c.add("d", at(10), false)
		if c.leading() || c.C() == nil {
			t.Fatal("a change inside the window is due at once")
		}
		c.fire(at(30))
		if b, ready := c.batch(); !ready || !slices.Equal(sorted(b.Paths), []string{"c", "d"}) {
			t.Fatalf("batch() = %+v, %v", b, ready)
		}
		c.sent()
		// Quiet again for a window: the next change is due at once.
		c.add("e", at(30), false)
		if !c.leading() {
			t.Fatal("a change after a quiet window waits")
		}
	})
	t.Run("a rescan after a quiet window is due at once", func(t *testing.T) {
		c := newCoalescer(settle, 100)
		defer c.stop()
		c.markRescan(at(0))
		c.flushLead()
		if b, ready := c.batch(); !ready || !b.Rescan {
			t.Fatalf("batch() = %+v, %v", b, ready)
		}
	})
	t.Run("due once the window passes quietly", func(t *testing.T) {
		c := newCoalescer(settle, 100)
		defer c.stop()
		c.add("b", at(0), false)
		c.add("a", at(5), false)
		c.add("b", at(10), false)
		c.fire(at(20)) // 10ms after the last change: not yet
		if _, ready := c.batch(); ready || c.C() == nil {
			t.Fatal("due too early, or the timer was not armed again")
		}
		c.fire(at(30))
		b, ready := c.batch()
		if !ready || !slices.Equal(sorted(b.Paths), []string{"a", "b"}) || b.Rescan {
			t.Fatalf("batch() = %+v, %v", b, ready)
		}
		c.sent()
		if _, ready := c.batch(); ready || c.C() != nil {
			t.Fatal("idle coalescer still has a batch or a timer")
		}
	})
	t.Run("an echo is delivered but is no activity", func(t *testing.T) {
		c := newCoalescer(settle, 100)
		defer c.stop()
		c.add("state.json", at(0), true) // the consumer's own write
		if !c.leading() {
			t.Fatal("an echo after a quiet window waits")
		}
		c.flushLead()
		if b, ready := c.batch(); !ready || !slices.Equal(b.Paths, []string{"state.json"}) {
			t.Fatalf("batch() = %+v, %v", b, ready)
		}
		c.sent()
		c.add("gate", at(1), false) // a person, a moment after the write
		if !c.leading() {
			t.Fatal("a change right after an echo waits for the window")
		}
		c.flushLead()
		c.sent()
		c.add("other", at(2), false) // but after a real change, the window holds
		if c.leading() {
			t.Fatal("a change right after another is due at once")
		}
	})
	t.Run("after an echo, a change inside the window is due at once", func(t *testing.T) {
		c := newCoalescer(settle, 100)
		defer c.stop()
		c.add("gates/g1", at(0), false) // opens step 1
		c.flushLead()
		c.sent()
		c.add("state.json", at(2), true) // step 1 recorded: the consumer acted
		if !c.leading() || c.C() != nil {
			t.Fatal("an echo with nothing pending waits")
		}
		c.flushLead()
		c.sent()
		c.add("gates/g2", at(3), false) // 3 ms after g1, but after the write
		if !c.leading() {
			t.Fatal("a change after the consumer's write waits for the window of the change before it")
		}
		c.flushLead()
		c.sent()
		c.add("gates/g3", at(4), false)
		if c.leading() {
			t.Fatal("a change right after another, with no write between, is due at once")
		}
		// An echo amid pending changes is gathered with them.
		c.add("state.json", at(5), true)
		c.add("gates/g4", at(6), false)
		if c.leading() || c.C() == nil {
			t.Fatal("changes gathered in a window became due at once")
		}
	})
	t.Run("a stream that never pauses is capped", func(t *testing.T) {
		c := newCoalescer(settle, 1000)
		defer c.stop()
		end := maxWaitWindows * int(settle/time.Millisecond)
		for ms := 0; ms <= end; ms += 5 {
			c.add(fmt.Sprint(ms), at(ms), false)
		}
		c.fire(at(end - 1))
		if _, ready := c.batch(); ready {
			t.Fatal("due before the cap")
		}
		c.fire(at(end))
		if _, ready := c.batch(); !ready {
			t.Fatal("a never-ending stream yields no batch")
		}
	})
	t.Run("changes merge into a batch the consumer has not taken", func(t *testing.T) {
		c := newCoalescer(settle, 100)
		defer c.stop()
		c.add("a", at(0), false)
		c.fire(at(20))
		c.add("b", at(30), false)
		c.fire(at(50))
		if b, _ := c.batch(); !slices.Equal(sorted(b.Paths), []string{"a", "b"}) {
			t.Fatalf("batch() = %+v", b)
		}
	})
	t.Run("merging into a batch not taken stops at the limit", func(t *testing.T) {
		// Each change comes after a pause of a window: each is due at once, and
		// merged into the batch the consumer has not taken while it fits.
		c := newCoalescer(settle, 3)
		defer c.stop()
		for i, p := range []string{"a", "b", "c", "d"} {
			if !c.add(p, at(30*i), false) || !c.leading() {
				t.Fatalf("add(%s) overran or waits", p)
			}
			c.flushLead()
		}
		if b, ready := c.batch(); !ready || !slices.Equal(sorted(b.Paths), []string{"a", "b", "c"}) {
			t.Fatalf("batch() = %+v, %v; want a, b, c, and d left pending", b, ready)
		}
		c.sent()
		if b, ready := c.batch(); !ready || !slices.Equal(b.Paths, []string{"d"}) {
			t.Fatalf("after the batch was taken, batch() = %+v, %v; want d due", b, ready)
		}
	})
	t.Run("a consumer stalled through pauses gets a rescan", func(t *testing.T) {
		c := newCoalescer(settle, 3)
		defer c.stop()
		for i, p := range []string{"a", "b", "c", "d", "e", "f"} {
			if !c.add(p, at(30*i), false) {
				t.Fatalf("add(%s) overran", p)
			}
			c.flushLead()
		}
		if c.add("g", at(180), false) {
			t.Fatal("add past two batches did not overrun")
		}
		c.fire(at(300))
		if b, _ := c.batch(); !b.Rescan {
			t.Fatalf("batch() = %+v, want a rescan", b)
		}
	})
	t.Run("a full batch is due at once", func(t *testing.T) {
		c := newCoalescer(settle, 3)
		defer c.stop()
		for i, p := range []string{"a", "b", "c", "d"} {
			if !c.add(p, at(i), false) {
				t.Fatalf("add(%s) overran", p)
			}
		}
		if b, ready := c.batch(); !ready || !slices.Equal(sorted(b.Paths), []string{"a", "b", "c"}) {
			t.Fatalf("batch() = %+v, %v; want a, b, c due", b, ready)
		}
		c.sent()
		c.fire(at(30))
		if b, ready := c.batch(); !ready || !slices.Equal(sorted(b.Paths), []string{"d"}) {
			t.Fatalf("batch() = %+v, %v; want d", b, ready)
		}
	})
	t.Run("a second full batch the consumer has no room for becomes a rescan", func(t *testing.T) {
		c := newCoalescer(settle, 3)
		defer c.stop()
		for i, p := range []string{"a", "b", "c", "d", "e", "f"} {
			if !c.add(p, at(i), false) {
				t.Fatalf("add(%s) overran", p)
			}
		}
		if c.add("g", at(6), false) {
			t.Fatal("add past two batches did not overrun")
		}
		c.add("h", at(7), false)
		c.fire(at(30))
		if b, _ := c.batch(); !b.Rescan || len(b.Paths) != 0 {
			t.Fatalf("batch() = %+v, want a bare rescan", b)
		}
	})
}

// TestWatcher_Burst: 10,000 files created at once (a git checkout) become a
// handful of batches, and none is missed. The consumer reads all along, as
// an idle sidecar does. The window is five times the default: a loaded
// machine that stops this process for a default window (20 ms) between the
// kernel's queueing of events and their reading makes a batch of the pause,
// which is no pause of the writer's that the test could count.
func TestWatcher_Burst(t *testing.T) {
	const settle = 5 * DefaultSettle
	h := watchIn(t, bulkDir(t), Config{Trees: []string{"repo"}, Settle: settle}, tuning{limit: maxPending}, func(h *harness) { h.mkdir("repo") })
	var created time.Duration
	pauses := 0 // of a window or longer
	var burstErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		start := time.Now()
		var ps []time.Duration
		ps, burstErr = burst(h.abs("repo"), 10_000)
		for _, p := range ps {
			if p >= settle {
				pauses++
			}
		}
		created = time.Since(start)
	})
	seen := make(map[string]bool)
	batches := h.readUntil(func(b Batch) bool {
		if b.Rescan {
			t.Error("rescan: events were lost")
		}
		for _, p := range b.Paths {
			seen[p] = true
		}
		return len(seen) >= 10_000+100 || b.Rescan // the files and their directories
	}, func() string { return fmt.Sprintf("all paths (%d seen)", len(seen)) })
	wg.Wait()
	if burstErr != nil {
		t.Fatal(burstErr)
	}
	for _, p := range burstPaths(10_000) {
		if !seen["repo/"+p] {
			t.Errorf("missed repo/%s", p)
		}
	}
	// A batch is due at the latest maxWait after its first change, and at once
	// after a quiet window: creating the files may take longer than maxWait, and
	// pause for a window, on a loaded machine. Ten passes is what a burst may
	// cost, and one more for each pause the writer made.
	maxWait := maxWaitWindows * settle
	limit := max(10, int(created/maxWait)+2) + pauses
	if len(batches) > limit {
		t.Errorf("%d batches for a burst that took %v with %d pauses of a window, want at most %d", len(batches), created, pauses, limit)
	}
	t.Logf("10000 files in %v with %d pauses, %d batches", created, pauses, len(batches))
}

// burst creates n files with some content in 100 directories under dir,
// made first unless they are there (the paths are burstPaths(n)). Another
// process writes them, as git would: in-process writers would compete with the watcher for the
// scheduler's processors, which a checkout does not.
//
// It returns the writer's pauses between two files of a default settle
// window or longer (descheduled, on a loaded machine): each pause of a window
// ends a batch, as it should.
func burst(dir string, n int) (pauses []time.Duration, err error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), burstEnv+"="+dir, burstCountEnv+"="+strconv.Itoa(n))
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("burst writer: %v\n%s%s", err, out, stderrOf(err))
	}
	for _, f := range strings.Fields(string(out)) {
		d, err := time.ParseDuration(f)
		if err != nil {
			return nil, fmt.Errorf("burst writer said %q: %v", out, err)
		}
		pauses = append(pauses, d)
	}
	return pauses, nil
}

func stderrOf(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}

const (
	burstEnv      = "WATCHER_TEST_BURST_DIR"
	burstCountEnv = "WATCHER_TEST_BURST_FILES"
)

func burstPaths(n int) []string {
	paths := make([]string, n)
	for i := range paths {
		paths[i] = fmt.Sprintf("d%02d/f%05d.txt", i%100, i)
	}
	return paths
}

// writeBurst is the burst writer process: a few goroutines, as git's
// parallel checkout.
func writeBurst(dir string, n int) error {
	const workers = 4
	paths := burstPaths(n)
	for d := range 100 {
		if err := os.MkdirAll(filepath.Join(dir, fmt.Sprintf("d%02d", d)), 0o755); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	var mu sync.Mutex
	last := time.Now()
	var pauses []string
	for k := range workers {
		wg.Go(func() {
			for i := k; i < n; i += workers {
				if err := os.WriteFile(filepath.Join(dir, paths[i]), []byte("content\n"), 0o644); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				now := time.Now()
				if p := now.Sub(last); p >= DefaultSettle {
					pauses = append(pauses, p.String())
				}
				last = now
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	fmt.Println(strings.Join(pauses, " "))
	return nil
}

// TestWatcher_StreamYieldsBatches: a file rewritten without pause still
// yields batches while the writer goes on.
func TestWatcher_StreamYieldsBatches(t *testing.T) {
	h := watch(t, Config{Paths: []string{"log"}, Settle: 5 * time.Millisecond})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(200 * time.Microsecond) // well inside the window
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if err := os.WriteFile(h.abs("log"), []byte(fmt.Sprint(i)), 0o644); err != nil {
				t.Error(err)
				return
			}
		}
	})
	defer wg.Wait()
	defer close(stop)
	for range 2 {
		h.waitFor("log")
	}
}

// TestWatcher_SlowConsumer: a consumer that reads nothing while more paths
// change than a batch may hold gets a rescan, and nothing blocks meanwhile.
func TestWatcher_SlowConsumer(t *testing.T) {
	h := watchTuned(t, Config{Trees: []string{"src"}}, tuning{limit: 100}, func(h *harness) { h.mkdir("src") })
	for i := range 300 {
		h.write(fmt.Sprintf("src/f%d", i), "")
	}
	waitUntil(t, "the events to be read", func() bool { return h.w.Stats().Events >= 300 })
	h.waitRescan()
	if n := h.w.Stats().Overflows; n != 1 {
		t.Errorf("Stats().Overflows = %d, want 1", n)
	}
	h.write("src/after", "")
	h.waitFor("src/after")
}

// TestWatcher_LeadingEdge: with a settle window far longer than the test's
// deadline, a change after a quiet spell still arrives: the first change is
// due at once, and only what follows it waits for the window.
func TestWatcher_LeadingEdge(t *testing.T) {
	h := watch(t, Config{Paths: []string{"approved.txt", "out"}, Settle: time.Hour})
	h.write("approved.txt", "yes")
	h.waitFor("approved.txt")
}

// TestWatcher_ExpectedEcho: the consumer's own write, announced, is delivered,
// and a gate opened a moment later is still due at once (the settle window is
// an hour: without Expect the gate would wait for it). The state file is
// written as the sidecar writes it, whole by a rename: one event. Written in
// place it makes two (a create, then a write), and the write, read after the
// create's batch went out, is a change nobody announced.
func TestWatcher_ExpectedEcho(t *testing.T) {
	h := watch(t, Config{Paths: []string{"state.json", "approved.txt"}, Settle: time.Hour})
	h.w.Expect("state.json")
	h.replace("state.json", "{}")
	h.waitFor("state.json")
	h.write("approved.txt", "yes")
	h.waitFor("approved.txt")
}

// sorted returns a sorted copy: a batch's paths come in no particular order.
func sorted(paths []string) []string {
	s := slices.Clone(paths)
	slices.Sort(s)
	return s
}
