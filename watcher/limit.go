package watcher

import (
	"errors"
	"time"
)

// While a watch limit keeps part of the scope unwatched, the watcher polls the
// scope so that a change there is still delivered, and retries arming with
// backoff until every watch is in place: raising the limit recovers without a
// restart.
const (
	// DefaultLimitPoll is how often the scope is polled while a watch limit is hit.
	DefaultLimitPoll = time.Second
	// limitRetryFirst and limitRetryMax bound the backoff between arming retries.
	limitRetryFirst = time.Second
	limitRetryMax   = time.Minute
)

// limitState is what the watcher keeps while a watch limit is hit.
type limitState struct {
	err   error   // the last ErrWatchLimit
	poll  *poller // the scope, polled
	tick  *time.Ticker
	retry *time.Timer
	wait  time.Duration
}

// limitHit takes an ErrWatchLimit: the first one is reported (its text names the
// limit and how to raise it), polling starts and a retry is set.
func (w *Watcher) limitHit(err error) {
	if w.limited != nil {
		w.limited.err = err
		return
	}
	w.send(err)
	p := &poller{root: w.root, scope: w.scope}
	p.scan(nil)
	first := w.retryFirst
	if first <= 0 {
		first = limitRetryFirst
	}
	every := w.limitPoll
	if every <= 0 {
		every = DefaultLimitPoll
	}
	w.limited = &limitState{err: err, poll: p, tick: time.NewTicker(every), retry: time.NewTimer(first), wait: first}
	w.isLimited.Store(true)
	w.log.Warn("watch limit reached: polling the workspace until every watch can be armed", "err", err)
	if w.onLimit != nil {
		w.onLimit(err)
	}
}

// limitChans are the polling tick and the retry timer, nil while no limit is hit.
func (w *Watcher) limitChans() (tick, retry <-chan time.Time) {
	if w.limited == nil {
		return nil, nil
	}
	return w.limited.tick.C, w.limited.retry.C
}

// pollLimited delivers what changed in the scope since the last poll.
func (w *Watcher) pollLimited() {
	l := w.limited
	l.poll.scope = w.scope
	n := 0
	if l.poll.scan(func(rel string) { n++; w.note(rel) }) {
		w.co.markRescan(time.Now())
	}
	w.events.Add(uint64(n))
}

// retryArm arms the watches again, with a new notifier when none could be had;
// while the limit still holds, the next retry waits twice as long.
func (w *Watcher) retryArm() {
	l := w.limited
	var err error
	if w.fsw == nil {
		err = w.arm()
	} else {
		err = w.set.resync()
	}
	switch {
	case errors.Is(err, ErrWatchLimit):
		l.err = err
		l.again()
		return
	case w.fsw == nil:
		w.send(err) // no notifier, for another reason: polling goes on
		l.again()
		return
	case err != nil:
		w.report(err)
	}
	w.pollLimited() // what changed before the watches were in place
	l.tick.Stop()
	l.retry.Stop()
	w.limited = nil
	w.isLimited.Store(false)
	w.countWatches()
	w.log.Info("every watch is armed again: polling stops", "watches", len(w.set.held))
	if w.onLimit != nil {
		w.onLimit(nil)
	}
}

// again sets the next retry, twice as far as the last.
func (l *limitState) again() {
	l.wait = min(2*l.wait, limitRetryMax)
	l.retry.Reset(l.wait)
}

// stopLimit releases the limit's timers when the watcher stops.
func (w *Watcher) stopLimit() {
	if w.limited != nil {
		w.limited.tick.Stop()
		w.limited.retry.Stop()
	}
}
