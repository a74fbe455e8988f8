package watcher

import (
	"errors"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// run is the only goroutine that touches the watch set and the coalescer.
func (w *Watcher) run() {
	defer w.wg.Done()
	defer close(w.errs)
	defer close(w.batches)
	defer w.co.stop()
	defer w.stopLimit()

	var events <-chan []event
	var ferrs <-chan error
	var overflow <-chan struct{}
	var source notifier
	tick, stopTick := w.pollTicker()
	defer stopTick()
	if !w.held() {
		return
	}
	for {
		if w.fsw != nil && w.fsw != source {
			// The notifier made at the start, or on a retry after no
			// inotify instance could be had.
			source = w.fsw
			events, ferrs, overflow = source.Events(), w.fsErrs.errs, w.fsErrs.kick
		}
		if w.co.leading() {
			// The first change after a quiet window is due at once, with
			// whatever came in beside it.
			events = w.drain(events)
			w.co.flushLead()
		}
		limitTick, limitRetry := w.limitChans()
		var out chan<- Batch
		b, ready := w.co.batch()
		if ready {
			out = w.batches
		}
		select {
		case <-w.done:
			return
		case evs, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			w.handleAll(evs)
		case err := <-ferrs:
			w.report(notifierError(err))
		case <-overflow:
			if w.fsErrs.overflowed.Swap(false) {
				w.overflowed()
			}
		case <-w.co.C():
			// Events that queued up while this goroutine waited for a CPU
			// belong to the batch: take them before deciding it is due.
			events = w.drain(events)
			w.co.fire(time.Now())
		case out <- b:
			w.co.sent()
			w.delivered.Add(1)
			w.echoesDelivered()
		case u := <-w.updates:
			u.reply <- w.apply(u)
		case <-tick:
			w.pollOnce()
		case <-limitTick:
			w.pollLimited()
		case <-limitRetry:
			w.retryArm()
		}
		w.countWatches()
	}
}

// pollTicker is the ticker of a polling watcher; nil when it takes events.
func (w *Watcher) pollTicker() (tick <-chan time.Time, stop func()) {
	if w.poll == nil {
		return nil, func() {}
	}
	t := time.NewTicker(w.pollEvery)
	return t.C, t.Stop
}

// held waits for a test's hold to be released; false when the watcher closed
// meanwhile.
func (w *Watcher) held() bool {
	if w.hold == nil {
		return true
	}
	select {
	case <-w.hold:
		return true
	case <-w.done:
		return false
	}
}

// apply changes the scope as Update or Adjust asked. A watch limit reached is
// no error: the caller's scope is in place, polled where unwatched.
func (w *Watcher) apply(u update) error {
	var err error
	if u.delta {
		err = w.adjust(u.added, u.removed)
	} else {
		err = w.update(u.scope)
	}
	if errors.Is(err, ErrWatchLimit) {
		w.limitHit(err)
		err = nil
	}
	return err
}

func (w *Watcher) countWatches() {
	if w.set != nil {
		w.watches.Store(int64(len(w.set.held)))
	}
}

// drain handles the slices of events that are ready now, as many as the
// notifier reads ahead.
func (w *Watcher) drain(events <-chan []event) <-chan []event {
	for range eventSlices + 1 {
		select {
		case evs, ok := <-events:
			if !ok {
				return nil
			}
			w.handleAll(evs)
		default:
			return events
		}
	}
	return events
}

// handleAll applies a slice of events. A write or a change of attributes
// right after another event on the same path changes nothing the first did
// not (a new file is a create and then a write): it is counted, no more.
func (w *Watcher) handleAll(evs []event) {
	w.events.Add(uint64(len(evs)))
	w.now = time.Now()
	last := ""
	for _, ev := range evs {
		if ev.name == last && ev.op&^(opWrite|opChmod) == 0 {
			continue
		}
		w.handle(ev)
		last = ev.name
	}
	w.now = time.Time{}
}

// handle applies one file event to the watch set and the pending batch.
func (w *Watcher) handle(ev event) {
	s := w.set
	name := ev.name
	if !s.holds(name) && !s.holds(parent(name)) {
		// From a watch released a moment ago: it was named before the
		// release, so after a rename it would carry the old, wrong name.
		return
	}
	if ev.has(opRemove) || ev.has(opRename) {
		if s.holds(name) {
			s.drop(name)
		}
	}
	if ev.has(opCreate) || ev.has(opRemove) || ev.has(opRename) {
		// A file holds no watch and has nothing below it to watch.
		if ev.kind != kindFile && s.onAnchorPath(name) {
			w.rearm(name)
		}
	}
	rel, inside := s.rel(name)
	if !inside {
		return
	}
	if ev.has(opCreate) {
		if err := s.created(rel, ev.kind, w.note); err != nil {
			w.report(err)
		}
	}
	w.note(rel)
}

// rearm reconciles the watch set after name, a directory on the way to a
// path, came or went. Below the root, only the paths and trees under name are
// looked at. When the root itself comes back, the next batch is a rescan.
func (w *Watcher) rearm(name string) {
	s := w.set
	if rel, inside := s.rel(name); inside && rel != "" && s.holds(s.root) {
		if err := s.rearmUnder(rel, w.note); err != nil {
			w.report(err)
		}
		return
	}
	rearmed, err := s.reconcile(w.note)
	if err != nil {
		w.report(err)
	}
	if rearmed {
		w.log.Debug("root watched again; rescanning", "root", s.root)
		w.co.markRescan(time.Now())
	} else if !s.holds(s.root) {
		w.log.Debug("root is gone; waiting for it", "root", s.root)
	}
}

// overflowed handles a kernel queue overflow: events were lost, so the watch
// set is repaired and the consumer told to rescan.
func (w *Watcher) overflowed() {
	w.overflows.Add(1)
	w.log.Debug("event queue overflowed; rescanning")
	if err := w.set.resync(); err != nil {
		w.report(err)
	}
	w.co.markRescan(time.Now())
}

// shift moves to a scope with the same trees whose paths differ by added and
// removed: only those are looked at, so that a plan of 2,000 steps whose
// running step's report folder changes costs one path, not 2,000.
func (w *Watcher) shift(sc scope, added, removed []string) error {
	w.scope = sc
	w.set.shiftScope(sc, added, removed)
	err := w.set.updatePaths(added, removed)
	w.countWatches()
	return err
}

// adjust changes the named paths by added and removed (both sorted). The
// watcher owns its scope's lists, so the paths change in place: a copy of
// 10,000 paths per step would cost more than the change.
func (w *Watcher) adjust(added, removed []string) error {
	sc := w.scope
	var in, out []string
	for _, p := range removed {
		if i, ok := slices.BinarySearch(sc.paths, p); ok {
			sc.paths = slices.Delete(sc.paths, i, i+1)
			out = append(out, p)
		}
	}
	for _, p := range added {
		if i, ok := slices.BinarySearch(sc.paths, p); !ok {
			sc.paths = slices.Insert(sc.paths, i, p)
			in = append(in, p)
		}
	}
	if w.poll != nil || w.set == nil || !w.set.holds(w.set.root) {
		return w.update(sc)
	}
	return w.shift(sc, in, out)
}

func (w *Watcher) update(sc scope) error {
	if w.poll != nil {
		w.scope = sc
		w.poll.scope = sc
		w.poll.scan(nil)
		return nil
	}
	if w.set == nil {
		w.scope = sc // no notifier yet: the limit's polling takes the scope, and so will the next arming
		return nil
	}
	if prev := w.set.scope; slices.Equal(prev.trees, sc.trees) && w.set.holds(w.set.root) {
		return w.shift(sc, SortedDiff(sc.paths, prev.paths), SortedDiff(prev.paths, sc.paths))
	}
	w.scope = sc
	w.set.setScope(sc)
	rearmed, err := w.set.reconcile(nil)
	if rearmed {
		w.co.markRescan(time.Now())
	}
	w.countWatches() // before Update returns
	return err
}

func (w *Watcher) pollOnce() {
	n := 0
	rescan := w.poll.scan(func(rel string) {
		n++
		w.note(rel)
	})
	w.events.Add(uint64(n))
	if rescan {
		w.co.markRescan(time.Now())
	}
}

// note adds rel to the pending batch if it matters and is not an editor's
// scratch file (unless it was named exactly).
func (w *Watcher) note(rel string) {
	if !w.scope.relevant(rel) {
		return
	}
	if scratch(path.Base(rel)) && !w.scope.isNamed(rel) {
		return
	}
	if !w.co.add(rel, w.clock(), w.echo(rel)) {
		w.overflows.Add(1)
		w.log.Debug("too many changed paths; rescanning", "limit", w.co.limit)
	}
}

// report hands a non-fatal error to the consumer without ever blocking. A watch
// limit is reported once, when it is first hit (see limitHit).
func (w *Watcher) report(err error) {
	if errors.Is(err, ErrWatchLimit) && w.set != nil {
		w.limitHit(err)
		return
	}
	w.send(err)
}

// send delivers err on Errors, or drops it when nobody reads.
func (w *Watcher) send(err error) {
	select {
	case w.errs <- err:
	default:
		w.log.Debug("error dropped: nobody reads Errors", "err", err)
	}
}

// clock is the time of the slice of events being handled, or now.
func (w *Watcher) clock() time.Time {
	if w.now.IsZero() {
		return time.Now()
	}
	return w.now
}

// parent is filepath.Dir of a clean absolute path, without cleaning it again.
func parent(name string) string {
	i := strings.LastIndexByte(name, filepath.Separator)
	if i <= 0 {
		return string(filepath.Separator)
	}
	return name[:i]
}
