//go:build darwin || dragonfly || freebsd || netbsd || openbsd

package proc

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// waitGone sleeps in kevent(2) on the process's exit (EVFILT_PROC, NOTE_EXIT),
// which kqueue reports for any process, a child or not, and on a pipe that ctx's
// end writes to.
func waitGone(ctx context.Context, pid int) error {
	kq, err := unix.Kqueue()
	if err != nil {
		return fmt.Errorf("kqueue: %w", err)
	}
	defer unix.Close(kq)
	var ev [1]unix.Kevent_t
	unix.SetKevent(&ev[0], pid, unix.EVFILT_PROC, unix.EV_ADD|unix.EV_ONESHOT)
	ev[0].Fflags = unix.NOTE_EXIT
	if _, err := unix.Kevent(kq, ev[:], nil, nil); errors.Is(err, unix.ESRCH) {
		return nil
	} else if err != nil {
		return fmt.Errorf("kevent proc %d: %w", pid, err)
	}
	wake, release, err := ctxPipe(ctx)
	if err != nil {
		return err
	}
	defer release()
	unix.SetKevent(&ev[0], wake, unix.EVFILT_READ, unix.EV_ADD)
	if _, err := unix.Kevent(kq, ev[:], nil, nil); err != nil {
		return fmt.Errorf("kevent pipe: %w", err)
	}
	for {
		n, err := unix.Kevent(kq, nil, ev[:], nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("kevent: %w", err)
		}
		if n > 0 && int(ev[0].Filter) == unix.EVFILT_PROC {
			return nil
		}
		if n > 0 {
			return ctx.Err()
		}
	}
}
