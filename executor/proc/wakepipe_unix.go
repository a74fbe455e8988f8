//go:build unix

package proc

import (
	"context"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// ctxPipe returns the read end of a pipe that becomes readable when ctx ends, for
// a wait in poll(2) or kevent(2) to wake on. release ends it; call it once.
func ctxPipe(ctx context.Context) (fd int, release func(), err error) {
	var p [2]int
	// Under ForkLock, as os.Pipe makes them: no process started meanwhile inherits
	// the pipe before it is close-on-exec (pipe2 is not on every system).
	syscall.ForkLock.RLock()
	err = unix.Pipe(p[:])
	if err == nil {
		unix.CloseOnExec(p[0])
		unix.CloseOnExec(p[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return -1, nil, fmt.Errorf("pipe: %w", err)
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_, _ = unix.Write(p[1], []byte{1})
		case <-done:
		}
		unix.Close(p[1])
	}()
	return p[0], func() { close(done); unix.Close(p[0]) }, nil
}
