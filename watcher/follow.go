package watcher

import (
	"context"
	"errors"
	"time"
)

// ErrStopped is returned by Follow when the watcher ended on its own.
var ErrStopped = errors.New("watcher: stopped")

// FollowFunc is what Follow calls: with the batch of changes (nil on the first
// call, and when the wait it asked for is over). It returns whether following is
// over, and again, when positive, to be called after that long with no change as
// well: a redraw, or a deadline of its own.
type FollowFunc func(b *Batch) (again time.Duration, done bool, err error)

// Follow is how a command follows files as they change (a status that redraws, a
// log that grows, a page, a worker waiting for a verdict): it watches cfg's paths,
// calls fn once the watch is armed, so that no change between fn's first read and
// the watch goes unseen, then again on every batch, until fn says it is done or
// fails, or ctx ends (nil). A watcher error, such as a watch limit reached, is
// logged to cfg.Logger and given to fn as a rescan: anything may have changed.
func Follow(ctx context.Context, cfg Config, fn FollowFunc) error {
	w, err := New(cfg)
	if err != nil {
		return err
	}
	defer w.Close()
	wake := time.NewTimer(time.Hour)
	wake.Stop()
	defer wake.Stop()
	call := func(b *Batch) (bool, error) {
		again, done, err := fn(b)
		wake.Stop()
		if again > 0 {
			wake.Reset(again)
		}
		return done || err != nil, err
	}
	if end, err := call(nil); end {
		return err
	}
	for {
		var (
			end bool
			err error
		)
		select {
		case <-ctx.Done():
			return nil
		case b, ok := <-w.Batches():
			if !ok {
				return ErrStopped
			}
			end, err = call(&b)
		case werr, ok := <-w.Errors():
			if !ok {
				return ErrStopped
			}
			if cfg.Logger != nil {
				cfg.Logger.Warn("file watcher", "err", werr)
			}
			end, err = call(&Batch{Rescan: true})
		case <-wake.C:
			end, err = call(nil)
		}
		if end {
			return err
		}
	}
}
