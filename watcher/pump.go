package watcher

import (
	"errors"
	"sync/atomic"
	"syscall"

	"github.com/fsnotify/fsnotify"
)

// errorPump drains fsnotify's error channel on a goroutine of its own.
// fsnotify sends some errors while it holds the lock that Add and Remove
// take: were the loop the reader, a loop in Add would wait for fsnotify, and
// fsnotify for the loop. An overflow is kept as a flag, so it is never lost;
// other errors are kept while there is room, except EINVAL: fsnotify failing
// to remove a watch the kernel had already dropped (a directory moved and
// deleted at once), which says nothing the events do not.
type errorPump struct {
	overflowed atomic.Bool
	kick       chan struct{} // one slot: an overflow to look at
	errs       chan error
	done       chan struct{}
}

func pumpErrors(src <-chan error) *errorPump {
	p := &errorPump{kick: make(chan struct{}, 1), errs: make(chan error, 16), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for err := range src { // until fsnotify closes it
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				p.overflowed.Store(true)
				select {
				case p.kick <- struct{}{}:
				default: // a kick is pending already
				}
				continue
			}
			if errors.Is(err, syscall.EINVAL) {
				continue
			}
			select {
			case p.errs <- err:
			default: // the loop is far behind; this one is dropped
			}
		}
	}()
	return p
}
