//go:build linux

package proc

import (
	"context"
	"os"
	"strconv"
	"syscall"
	"time"
)

// tryProcs lists the live processes, this one aside, that a try started, as
// far as /proc can tell once nothing holds its lock: those in the try's
// process group or session (while these are still the try's, see groupsOwned),
// and those whose environment carries the try's marks. A process that left
// both and cleared its environment is not found.
func tryProcs(rec TryRecord, marks []string) []int {
	group, sid := rec.group(), 0
	if !groupsOwned(rec) {
		group = 0
	} else {
		sid = rec.Sid
	}
	self := os.Getpid()
	dir, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer dir.Close()
	names, _ := dir.Readdirnames(-1)
	var out []int
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == self {
			continue
		}
		c, ok := readChild(pid)
		if !ok || c.state == "Z" || c.state == "X" {
			continue
		}
		if group > 0 && c.pgid == group || sid > 0 && c.sid == sid || carries(pid, marks) {
			out = append(out, pid)
		}
	}
	return out
}

// tryRunning reports whether a process the try started still lives.
func tryRunning(rec TryRecord, marks []string) bool { return len(tryProcs(rec, marks)) > 0 }

// waitTryGone blocks until no process the try started lives, or ctx ends: it
// sleeps on each one's exit in turn (a pidfd), then looks again.
func waitTryGone(ctx context.Context, rec TryRecord, marks []string) {
	for ctx.Err() == nil {
		pids := tryProcs(rec, marks)
		if len(pids) == 0 {
			return
		}
		if WaitGone(ctx, pids[0]) != nil {
			return
		}
	}
}

// stopTryProcs ends what the try started that still lives: SIGTERM (to the
// group each leads, too), SIGKILL to what is left after grace.
func stopTryProcs(rec TryRecord, marks []string, grace time.Duration) {
	pids := tryProcs(rec, marks)
	if len(pids) == 0 {
		return
	}
	signalAll(pids, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	for _, pid := range pids {
		_ = WaitGone(ctx, pid)
	}
	signalAll(tryProcs(rec, marks), syscall.SIGKILL)
}
