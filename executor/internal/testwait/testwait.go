// Package testwait waits, in tests, for effects that send no signal (a file
// written, a process gone, a server's answer) by looking again with a pause
// that grows, until a deadline.
package testwait

import (
	"testing"
	"time"
)

// For polls cond until it holds, pausing 1 ms at first and at most 50 ms
// between looks; it fails t once within has passed, naming what it waited for.
func For(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for pause := time.Millisecond; !cond(); pause = min(2*pause, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s (%s)", what, within)
		}
		time.Sleep(pause)
	}
}
