package notify

import (
	"context"
	"sync"
	"time"
)

// fakeSink is a destination in memory: it records each attempt, fails while fail
// says so, and blocks each attempt until gate is closed, when there is a gate.
type fakeSink struct {
	gate chan struct{}
	// entered, if set, is told each report's id as a delivery of it begins
	// (before the gate): the report is in flight.
	entered chan string
	fail    func(Notice) error

	mu        sync.Mutex
	attempts  []time.Time
	delivered []string
}

func (f *fakeSink) deliver(ctx context.Context, r Notice, _ []byte) error {
	if f.entered != nil {
		select {
		case f.entered <- r.ID:
		default:
		}
	}
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts = append(f.attempts, time.Now())
	if f.fail != nil {
		if err := f.fail(r); err != nil {
			return err
		}
	}
	f.delivered = append(f.delivered, r.ID)
	return nil
}

func (f *fakeSink) ids() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.delivered...)
}

func (f *fakeSink) config(id string) SinkConfig { return SinkConfig{deliver: f, testID: id} }
