package executor

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// waitPidfd sleeps in poll(2) on a pidfd, which becomes readable when the process
// exits, and on a pipe that ctx's end writes to.
func waitPidfd(ctx context.Context, pid int) error {
	pfd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(pfd)
	var wake [2]int
	if err := unix.Pipe2(wake[:], unix.O_CLOEXEC); err != nil {
		return fmt.Errorf("pipe: %w", err)
	}
	defer unix.Close(wake[0])
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			_, _ = unix.Write(wake[1], []byte{1})
		case <-done:
		}
		unix.Close(wake[1])
	}()
	fds := []unix.PollFd{{Fd: int32(pfd), Events: unix.POLLIN}, {Fd: int32(wake[0]), Events: unix.POLLIN}}
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
