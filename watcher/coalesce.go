package watcher

import (
	"slices"
	"time"
)

// coalescer gathers changed paths into batches. The first change after a
// quiet window (no change for settle) is due at once, the leading edge: a gate
// file that appears while nothing else happens reaches the consumer with no
// wait. The changes that follow it are coalesced: a batch is due once no
// change came for the settle window, or once the oldest change waited
// maxWait, so that a stream that never pauses still yields batches. maxWait
// is long (50 windows, and at least a second) so that a checkout of
// thousands of files makes a few batches, not a pass over a half-written tree
// every 200ms. One timer serves all paths, and it runs only while something
// is pending: idle, nothing ticks.
//
// The consumer's own writes (echoes) are no activity. When nothing is pending
// an echo is due at once, and the change after it is the first of a new
// window however soon it comes: the write shows the consumer acted on every
// change before it, so a gate opened right after a step's end, or a step's
// output, does not wait for the step's own gate to settle.
//
// While a due batch waits for the consumer, newer changes are gathered and
// merged into it: a slow consumer gets fewer, larger batches, and the kernel's
// queue is read on regardless, so it does not overflow on its account. A
// batch that reaches limit paths is due at once; when the consumer has not
// taken the one before, it degrades to a rescan instead. So at most two
// batches' worth of paths are held, however slow the consumer is.
type coalescer struct {
	settle, maxWait time.Duration
	limit           int

	pending     map[string]struct{}
	rescan      bool      // pending includes a rescan
	first, last time.Time // of the pending changes
	timer       *time.Timer
	timing      bool // the timer is armed
	lead        bool // the pending changes came after a quiet window: due at once
	acted       bool // an echo came after the last change

	out     Batch // due, waiting for the consumer
	ready   bool
	overdue bool // pending is due but did not fit in out: due once out is taken
}

// maxWaitWindows is maxWait in settle windows; minMaxWait its floor, so that
// a short window does not turn a long burst into many passes.
const (
	maxWaitWindows = 50
	minMaxWait     = time.Second
)

func newCoalescer(settle time.Duration, limit int) *coalescer {
	return &coalescer{
		settle:  settle,
		maxWait: max(maxWaitWindows*settle, minMaxWait),
		limit:   limit,
		pending: make(map[string]struct{}),
	}
}

// add records a changed path; an echo (the consumer's own change, announced)
// is no activity for the quiet window. It reports false when the limit was
// reached and the batch turned into a rescan.
func (c *coalescer) add(rel string, now time.Time, echo bool) bool {
	c.touch(now, echo)
	if c.rescan || c.out.Rescan {
		return true // a rescan covers every path
	}
	if len(c.pending) >= c.limit {
		if _, ok := c.pending[rel]; ok {
			return true
		}
		if c.ready {
			// The consumer has not taken the last full batch either.
			c.markRescan(now)
			return false
		}
		c.flush() // a full batch is due at once; gathering goes on
		c.touch(now, echo)
	}
	c.pending[rel] = struct{}{} // one hash, whether it was there or not
	return true
}

// markRescan makes the next batch a rescan: the consumer must re-read
// everything, so the paths gathered so far are dropped.
func (c *coalescer) markRescan(now time.Time) {
	c.touch(now, false)
	c.rescan = true
	c.drain()
}

func (c *coalescer) touch(now time.Time, echo bool) {
	idle := len(c.pending) == 0 && !c.rescan && !c.timing && !c.lead
	quiet := idle && (echo || c.acted || c.last.IsZero() || now.Sub(c.last) >= c.settle)
	if idle {
		c.first = now
	}
	if echo {
		c.acted = true
	} else {
		c.last, c.acted = now, false
	}
	switch {
	case quiet:
		c.lead = true
	case !c.timing && !c.lead:
		c.arm(c.settle)
	}
}

// leading reports that the pending changes came after a quiet window and are
// due now: the caller takes in what is already queued, then calls flushLead.
func (c *coalescer) leading() bool { return c.lead }

// flushLead makes the pending changes due at once.
func (c *coalescer) flushLead() {
	c.lead = false
	c.flush()
}

func (c *coalescer) arm(d time.Duration) {
	c.timing = true
	if c.timer == nil {
		c.timer = time.NewTimer(d)
		return
	}
	c.timer.Reset(d)
}

// C is the timer's channel while it is armed, nil otherwise.
func (c *coalescer) C() <-chan time.Time {
	if !c.timing {
		return nil
	}
	return c.timer.C
}

// fire handles the timer: the pending changes become due, or the timer is
// armed again for the moment they will be.
func (c *coalescer) fire(now time.Time) {
	c.timing = false
	due := c.last.Add(c.settle)
	if capped := c.first.Add(c.maxWait); capped.Before(due) {
		due = capped
	}
	if now.Before(due) {
		c.arm(due.Sub(now))
		return
	}
	c.flush()
}

// flush merges the pending changes into the due batch. When the consumer has
// not taken that batch and the merge would take it past the limit, the changes
// stay pending, due: they follow once it is taken (sent), and reaching the
// limit meanwhile makes a rescan (add). A consumer that stalls while the
// changes come with pauses, each a settle window, is held to two batches'
// worth as one that stalls through a stream is.
func (c *coalescer) flush() {
	if len(c.pending) == 0 && !c.rescan {
		return
	}
	if !c.rescan && !c.out.Rescan {
		for _, p := range c.out.Paths {
			delete(c.pending, p) // already in the batch the consumer has not taken
		}
		if c.ready && len(c.out.Paths)+len(c.pending) > c.limit {
			c.overdue = true
			return
		}
	}
	c.ready, c.overdue = true, false
	if c.rescan || c.out.Rescan {
		c.out = Batch{Rescan: true}
	} else {
		paths := slices.Grow(c.out.Paths, len(c.pending))
		for p := range c.pending {
			paths = append(paths, p)
		}
		c.out.Paths = paths
	}
	c.rescan = false
	c.drain()
}

// drain empties pending; after a burst it lets the big map go.
func (c *coalescer) drain() {
	if len(c.pending) > 1024 {
		c.pending = make(map[string]struct{})
		return
	}
	clear(c.pending)
}

// batch returns the due batch, if any.
func (c *coalescer) batch() (Batch, bool) { return c.out, c.ready }

// sent records that the consumer took the due batch; the changes that were
// due but did not fit in it are due now.
func (c *coalescer) sent() {
	c.out = Batch{}
	c.ready = false
	if c.overdue {
		c.flush()
	}
}

func (c *coalescer) stop() {
	if c.timer != nil {
		c.timer.Stop()
	}
}
