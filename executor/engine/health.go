package engine

import (
	"fmt"
	"sync/atomic"
	"time"
)

// DefaultHealthBound is how long a turn of the loop may last, or work wait for
// it, before /healthz fails: a turn does no slow work, so this is generous.
const DefaultHealthBound = 30 * time.Second

// Heartbeat says whether an event loop still turns, for /healthz: a loop stuck
// in one turn (a read that blocks, a hung call), or one that has not taken work
// handed to it, is unhealthy once that has lasted longer than a bound. An idle
// loop, with nothing to do, is healthy however long it waits.
//
// The loop calls Busy when it takes an input and Turned when it is done with it;
// whoever hands the loop work may call Wanted. All methods are safe to call from
// any goroutine; the zero Heartbeat is an idle loop.
type Heartbeat struct {
	busySince    atomic.Int64 // unix ns; 0: between turns
	wantedSince  atomic.Int64 // unix ns of the oldest work not yet taken; 0: none
	lastTurnDone atomic.Int64 // unix ns
}

// Wanted records that work was handed to the loop at now (a file event, an
// agent's exit, a timer). Only the oldest untaken hand-off counts.
func (h *Heartbeat) Wanted(now time.Time) {
	h.wantedSince.CompareAndSwap(0, now.UnixNano())
}

// Busy records that the loop took an input at now and is working on it. Work
// handed over before now counts as taken.
func (h *Heartbeat) Busy(now time.Time) {
	h.busySince.Store(now.UnixNano())
	h.wantedSince.Store(0)
}

// Turned records that the loop finished a turn at now and waits for the next.
func (h *Heartbeat) Turned(now time.Time) {
	h.busySince.Store(0)
	h.lastTurnDone.Store(now.UnixNano())
}

// LastTurn is when the loop last finished a turn; zero before the first.
func (h *Heartbeat) LastTurn() time.Time {
	if ns := h.lastTurnDone.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// Healthy reports whether the loop has been neither stuck in one turn nor
// leaving work untaken for longer than bound.
func (h *Heartbeat) Healthy(now time.Time, bound time.Duration) bool {
	return h.Check(now, bound) == nil
}

// Check is Healthy with the reason: nil, or what has lasted too long.
func (h *Heartbeat) Check(now time.Time, bound time.Duration) error {
	if ns := h.busySince.Load(); ns != 0 {
		if d := now.Sub(time.Unix(0, ns)); d > bound {
			return fmt.Errorf("event loop stuck in one turn for %s (bound %s)", d.Round(time.Millisecond), bound)
		}
	}
	if ns := h.wantedSince.Load(); ns != 0 {
		if d := now.Sub(time.Unix(0, ns)); d > bound {
			return fmt.Errorf("event loop has left work untaken for %s (bound %s)", d.Round(time.Millisecond), bound)
		}
	}
	return nil
}
