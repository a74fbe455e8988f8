package proc

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// waitGone sleeps in poll(2) on a pidfd, which becomes readable when the process
// exits, and on a pipe that ctx's end writes to.
func waitGone(ctx context.Context, pid int) error {
	pfd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(pfd)
	wake, release, err := ctxPipe(ctx)
	if err != nil {
		return err
	}
	defer release()
	fds := []unix.PollFd{{Fd: int32(pfd), Events: unix.POLLIN}, {Fd: int32(wake), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("poll pidfd: %w", err)
		}
		if fds[0].Revents != 0 {
			return nil
		}
		return ctx.Err()
	}
}
