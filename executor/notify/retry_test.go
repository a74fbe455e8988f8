package notify

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// The retry schedule on a fake clock: backoff doubling from Initial to Max, a
// report given up on the first failure past Retry.For, and the next report tried
// after the current backoff, not at once, so a dead sink is never hammered.
func TestNotifier_RetrySchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		fake := &fakeSink{fail: func(Notice) error { return errors.New("down") }}
		var gaveUp []string
		n, err := New(Config{Dir: t.TempDir(), Sinks: []SinkConfig{fake.config("a")}, Logger: testLogger(t),
			Retry:    Retry{Initial: time.Second, Max: 8 * time.Second, For: time.Minute},
			OnGiveUp: func(_ string, r Notice, _ error) { gaveUp = append(gaveUp, r.ID) }})
		if err != nil {
			t.Fatal(err)
		}
		ids := emitN(t, n, 2, "s")
		time.Sleep(80 * time.Second)
		synctest.Wait()
		var offsets []time.Duration
		for _, at := range fake.attempts {
			offsets = append(offsets, at.Sub(start))
		}
		s := time.Second
		want := []time.Duration{0, 1 * s, 3 * s, 7 * s, 15 * s, 23 * s, 31 * s, 39 * s, 47 * s, 55 * s, 63 * s, 71 * s}
		if !slices.Equal(offsets, want) {
			t.Errorf("attempts at %v, want %v", offsets, want)
		}
		if !slices.Equal(gaveUp, ids) {
			t.Errorf("gave up %v, want %v", gaveUp, ids)
		}
		if err := n.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// A success resets the backoff: the next failure waits Initial again.
func TestNotifier_SuccessResetsBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		failures := 3
		fake := &fakeSink{fail: func(Notice) error {
			if failures > 0 {
				failures--
				return errors.New("down")
			}
			return nil
		}}
		n, err := New(Config{Dir: t.TempDir(), Sinks: []SinkConfig{fake.config("a")}, Logger: testLogger(t),
			Retry: Retry{Initial: time.Second, Max: time.Minute, For: time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
		emitN(t, n, 1, "s")
		time.Sleep(time.Minute)
		synctest.Wait()
		failures = 1
		emitN(t, n, 1, "s")
		time.Sleep(time.Minute)
		synctest.Wait()
		var offsets []time.Duration
		for _, at := range fake.attempts {
			offsets = append(offsets, at.Sub(start))
		}
		s := time.Second
		want := []time.Duration{0, 1 * s, 3 * s, 7 * s, 60 * s, 61 * s}
		if !slices.Equal(offsets, want) {
			t.Errorf("attempts at %v, want %v", offsets, want)
		}
		if len(fake.ids()) != 2 {
			t.Errorf("delivered %v, want both", fake.ids())
		}
		if err := n.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}
