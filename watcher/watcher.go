package watcher

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultSettle is the coalescing window used when Config.Settle is zero.
const DefaultSettle = 20 * time.Millisecond

// maxPending bounds the paths one batch gathers: a full batch is due at once,
// and one that fills while the consumer still has not taken the last becomes
// a rescan, which bounds memory however slow the consumer is.
const maxPending = 50_000

// Config says what to watch.
type Config struct {
	// Root is the workspace directory, absolute or relative to the working
	// directory. It must exist when New is called.
	Root string
	// Paths are slash-separated paths relative to Root whose changes matter:
	// files or directories (then their entries too, one level deep), which
	// may not exist yet.
	Paths []string
	// Trees are directories relative to Root watched recursively ("" or "."
	// is the whole root), skipping .git and node_modules below the tree root.
	Trees []string
	// Settle is the coalescing window: a batch is due once no change came for
	// this long, and at the latest 50 windows (a second by default) after its
	// first change. Zero means DefaultSettle.
	Settle time.Duration
	// Poll, when positive, replaces file events with a stat scan of the
	// watched paths and trees at this interval, for file systems that deliver
	// no events (NFS, 9p, Docker Desktop mounts; see NetworkFS).
	Poll time.Duration
	// Logger receives debug records; nil discards them.
	Logger *slog.Logger
	// OnLimit, when set, is called from the watcher's goroutine with the
	// ErrWatchLimit that leaves part of the scope unwatched (polled meanwhile),
	// and with nil once every watch is armed again.
	OnLimit func(err error)
}

// Batch is a set of paths that may have changed.
type Batch struct {
	// Paths are deduplicated, slash-separated, relative to Root and in no
	// particular order: sorting the 100,000 paths of a burst would cost more
	// than reading their events.
	Paths []string
	// Rescan means changes may have been missed (an event queue overflowed, or
	// the root was removed and is back): re-read everything. Paths may then
	// be empty.
	Rescan bool
}

// Stats are counters for metrics.
type Stats struct {
	Watches   int    // directories holding an inotify watch; 0 when polling
	Events    uint64 // file events received (when polling: changes found)
	Overflows uint64 // lost or dropped changes (the kernel's event queue overflowed, or a batch outgrew its limit while the consumer lagged), each answered with a rescan
	Batches   uint64 // batches delivered
	Limited   bool   // a watch limit leaves part of the scope unwatched: it is polled, and arming retried
}

// Watcher delivers batches of changed paths under one workspace directory.
type Watcher struct {
	log       *slog.Logger
	root      string
	scope     scope
	fsw       notifier   // nil when polling
	fsErrs    *errorPump // nil when polling
	set       *watchSet  // nil when polling
	poll      *poller    // nil unless polling
	pollEvery time.Duration
	co        *coalescer
	now       time.Time       // when the slice of events being handled came; zero outside one
	hold      <-chan struct{} // tests: the loop reads nothing until it is closed

	limited     *limitState // while a watch limit keeps part of the scope unwatched
	onLimit     func(error)
	limitPoll   time.Duration // 0: DefaultLimitPoll
	retryFirst  time.Duration // 0: limitRetryFirst
	newNotifier func() (notifier, error)

	batches chan Batch
	errs    chan error
	updates chan update
	done    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
	closed  error

	echoMu sync.Mutex
	echoes map[string]echoState // paths this process changes itself: see Expect
	echoN  atomic.Int32         // len(echoes): most events need no lock

	watches   atomic.Int64
	events    atomic.Uint64
	overflows atomic.Uint64
	delivered atomic.Uint64
	isLimited atomic.Bool
}

type update struct {
	scope scope
	// With delta, scope is unused: the named paths change by added and removed.
	delta          bool
	added, removed []string
	reply          chan error
}

// tuning holds knobs that only tests turn.
type tuning struct {
	limit int             // paths per batch before it becomes a rescan
	hold  <-chan struct{} // when set, the loop starts reading once it is closed
	// notifier replaces the kernel's, to refuse watches as a limit would.
	notifier   func() (notifier, error)
	limitPoll  time.Duration
	retryFirst time.Duration
}

// New arms the watches and starts delivering batches; changes made after it
// returns are reported (what was there before is the caller's to read). It
// fails when the root is missing. A watch limit reached (ErrWatchLimit), watches
// or inotify instances, is not fatal: it is reported on Errors, the scope is
// polled meanwhile, and arming is retried until it succeeds. Close releases
// everything.
func New(cfg Config) (*Watcher, error) {
	return start(cfg, tuning{limit: maxPending})
}

func start(cfg Config, tu tuning) (*Watcher, error) {
	if cfg.Root == "" {
		cfg.Root = "."
	}
	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", cfg.Root, err)
	}
	if fi, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("watch %s: %w", cfg.Root, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("watch %s: not a directory", cfg.Root)
	}
	sc, err := newScope(cfg.Paths, cfg.Trees)
	if err != nil {
		return nil, err
	}
	if cfg.Settle < 0 || cfg.Poll < 0 {
		return nil, errors.New("watch: negative settle or poll interval")
	}
	if cfg.Settle == 0 {
		cfg.Settle = DefaultSettle
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{
		log:       log.With("component", "watcher"),
		root:      root,
		scope:     sc,
		pollEvery: cfg.Poll,
		co:        newCoalescer(cfg.Settle, tu.limit),
		hold:      tu.hold,

		onLimit:     cfg.OnLimit,
		limitPoll:   tu.limitPoll,
		retryFirst:  tu.retryFirst,
		newNotifier: tu.notifier,
		batches:     make(chan Batch),
		errs:        make(chan error, 16),
		updates:     make(chan update),
		done:        make(chan struct{}),
	}
	if cfg.Poll > 0 {
		w.poll = &poller{root: root, scope: sc}
		w.poll.scan(nil)
	} else if err := w.arm(); errors.Is(err, ErrWatchLimit) {
		w.limitHit(err) // with no inotify instance to be had too: the notifier is made again on a retry
	} else if err != nil {
		return nil, err
	}
	w.wg.Add(1)
	go w.run()
	return w, nil
}

func (w *Watcher) arm() error {
	mk := w.newNotifier
	if mk == nil {
		mk = newNotifier
	}
	fsw, err := mk()
	if err != nil {
		return initError(err)
	}
	w.fsw = fsw
	w.fsErrs = pumpErrors(fsw.Errors())
	w.set = newWatchSet(fsw, w.root, w.scope, w.report)
	if _, err := w.set.reconcile(nil); err != nil {
		if errors.Is(err, ErrWatchLimit) {
			w.countWatches()
			return err // what is armed stays: the rest is polled until it can be
		}
		fsw.Close()
		<-w.fsErrs.done
		w.fsw, w.fsErrs, w.set = nil, nil, nil
		return err
	}
	w.countWatches()
	w.log.Debug("watching", "root", w.root, "watches", len(w.set.held))
	return nil
}

// Batches delivers batches of changed paths. It is closed by Close.
func (w *Watcher) Batches() <-chan Batch { return w.batches }

// Errors delivers non-fatal errors: a directory that cannot be watched
// (including ErrWatchLimit once running), or a failure fsnotify reports. It is
// closed by Close. Errors are dropped while nobody reads.
func (w *Watcher) Errors() <-chan error { return w.errs }

// Expect says that this process is about to change rel itself (a sidecar
// writing its state file). The change is delivered as any other, but it is no
// sign of activity: a change that follows soon after, a gate a person opens,
// is still the first after a quiet window, due at once rather than a settle
// window later. The events of rel count so until the batch that holds them is
// delivered; a change never comes later or not at all on Expect's account.
// Safe from any goroutine.
func (w *Watcher) Expect(rel string) {
	w.echoMu.Lock()
	defer w.echoMu.Unlock()
	if w.echoes == nil {
		w.echoes = map[string]echoState{}
	}
	if _, ok := w.echoes[rel]; !ok {
		w.echoN.Add(1)
	}
	w.echoes[rel] = echoExpected
}

type echoState int8

const (
	echoExpected echoState = iota + 1 // announced, not seen yet
	echoSeen                          // seen: gone once its batch is delivered
)

// echo reports whether a change of rel is one announced by Expect.
func (w *Watcher) echo(rel string) bool {
	if w.echoN.Load() == 0 {
		return false
	}
	w.echoMu.Lock()
	defer w.echoMu.Unlock()
	if _, ok := w.echoes[rel]; !ok {
		return false
	}
	w.echoes[rel] = echoSeen
	return true
}

// echoesDelivered forgets the echoes seen: their batch went out.
func (w *Watcher) echoesDelivered() {
	if w.echoN.Load() == 0 {
		return
	}
	w.echoMu.Lock()
	defer w.echoMu.Unlock()
	for rel, st := range w.echoes {
		if st == echoSeen {
			delete(w.echoes, rel)
			w.echoN.Add(-1)
		}
	}
}

// Update replaces the paths and trees, as in Config, and returns once the
// new watch set is armed. Changes made after it returns are reported.
func (w *Watcher) Update(paths, trees []string) error {
	sc, err := newScope(paths, trees)
	if err != nil {
		return err
	}
	u := update{scope: sc, reply: make(chan error, 1)}
	select {
	case w.updates <- u:
		return <-u.reply
	case <-w.done:
		return ErrClosed
	}
}

// Adjust names the paths added and no longer names the paths removed, keeping
// the rest of the watch set as it is, and returns once the watches match. It
// costs what changed: a plan of 5,000 steps whose running step's report folder
// moves on costs two paths, where Update would compare all 10,000. A path
// added that is named already, or removed that is not, changes nothing.
func (w *Watcher) Adjust(added, removed []string) error {
	add, err := cleanAll(added)
	if err != nil {
		return err
	}
	rm, err := cleanAll(removed)
	if err != nil {
		return err
	}
	u := update{delta: true, added: add, removed: rm, reply: make(chan error, 1)}
	select {
	case w.updates <- u:
		return <-u.reply
	case <-w.done:
		return ErrClosed
	}
}

// Stats returns the counters; it is safe to call from any goroutine.
func (w *Watcher) Stats() Stats {
	return Stats{
		Watches:   int(w.watches.Load()),
		Events:    w.events.Load(),
		Overflows: w.overflows.Load(),
		Batches:   w.delivered.Load(),
		Limited:   w.isLimited.Load(),
	}
}

// Close stops the watcher, waits for its goroutine, releases the watches and
// closes the channels. It may be called more than once.
func (w *Watcher) Close() error {
	w.once.Do(func() {
		close(w.done)
		w.wg.Wait()
		if w.fsw != nil {
			w.closed = w.fsw.Close()
			<-w.fsErrs.done
		}
	})
	return w.closed
}
