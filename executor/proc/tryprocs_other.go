//go:build !linux

package proc

import (
	"context"
	"errors"
	"syscall"
	"time"
)

// Without /proc, what a try started is found by its process group alone: a
// process that left it is not found.

func tryRunning(rec TryRecord, _ []string) bool {
	group := rec.group()
	if group <= 0 || !groupsOwned(rec) {
		return false
	}
	err := syscall.Kill(-group, 0)
	return (err == nil || errors.Is(err, syscall.EPERM)) && groupHasLiving(group)
}

// waitTryGone looks at the try's group again with a growing pause, a second at
// most: the system offers no event for a group that empties.
func waitTryGone(ctx context.Context, rec TryRecord, marks []string) {
	for pause := 10 * time.Millisecond; tryRunning(rec, marks); pause = min(2*pause, time.Second) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
	}
}

// stopTryProcs ends the try's group: SIGTERM, SIGKILL after grace.
func stopTryProcs(rec TryRecord, marks []string, grace time.Duration) {
	if !tryRunning(rec, marks) {
		return
	}
	_ = syscall.Kill(-rec.group(), syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	waitTryGone(ctx, rec, marks)
	if tryRunning(rec, marks) {
		_ = syscall.Kill(-rec.group(), syscall.SIGKILL)
	}
}
