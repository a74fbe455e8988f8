package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// WorkerOptions configure a worker.
type WorkerOptions struct {
	Workdir string        // each run's workspace is a fresh folder under it
	MaxRuns int           // runs at once; 0: 1
	Lease   time.Duration // how long a silent worker keeps its runs; 0: DefaultLease
	Name    string        // the worker's name in the fleet's view; "": host and pid
	Logger  *slog.Logger
	// Notifier, when set, tells each run's transitions from its workspace, as
	// stepseq watch does; nil: they are journaled only.
	Notifier Notifier
}

// Worker takes runs from the queue while it has room and runs each in a fresh
// clone under its workdir, with the engine's sidecar.
type Worker struct {
	c    *Conn
	opt  WorkerOptions
	log  *slog.Logger
	cons jetstream.Consumer
}

// NewWorker checks the workdir and opens the consumer runs are taken from,
// making it when absent.
func NewWorker(ctx context.Context, c *Conn, opt WorkerOptions) (*Worker, error) {
	if opt.MaxRuns <= 0 {
		opt.MaxRuns = 1
	}
	if opt.Lease <= 0 {
		opt.Lease = DefaultLease
	}
	if opt.Name == "" {
		host, _ := os.Hostname()
		opt.Name = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	abs, err := checkWorkdir(opt.Workdir)
	if err != nil {
		return nil, err
	}
	opt.Workdir = abs
	cons, err := ensureConsumer(ctx, c.Stream, opt.Lease, opt.MaxRuns)
	if err != nil {
		return nil, err
	}
	return &Worker{c: c, opt: opt, log: opt.Logger.With("worker", opt.Name), cons: cons}, nil
}

// checkWorkdir makes the workdir when absent and proves that a file can be
// written there: a full or read-only disk is said at start, not at a clone.
func checkWorkdir(dir string) (string, error) {
	if dir == "" {
		return "", errors.New("--workdir: give the folder runs are cloned into")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", fmt.Errorf("--workdir %s: %w", dir, err)
	}
	probe, err := os.CreateTemp(abs, ".stepseq-probe-")
	if err == nil {
		_, err = probe.Write(make([]byte, 4096))
		if serr := probe.Sync(); err == nil {
			err = serr
		}
		probe.Close()
		os.Remove(probe.Name())
	}
	if err != nil {
		return "", fmt.Errorf("--workdir %s cannot be written (full, read-only, or not ours): %w", dir, err)
	}
	return abs, nil
}

// ensureConsumer opens the workers' durable consumer, making it when absent.
// Its ack wait is the lease, shared by every worker: one made with another is
// an error naming both, since changing it would change every worker's lease.
func ensureConsumer(ctx context.Context, s jetstream.Stream, lease time.Duration, maxRuns int) (jetstream.Consumer, error) {
	cons, err := s.Consumer(ctx, Consumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		cons, err = s.CreateConsumer(ctx, jetstream.ConsumerConfig{
			Durable: Consumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: lease,
			MaxAckPending: maxAckPending, MaxDeliver: -1,
			Description: "stepseq: the workers take runs from here",
		})
	}
	if err != nil {
		return nil, jsErr("consumer "+Consumer, err)
	}
	cfg := cons.CachedInfo().Config
	switch {
	case cfg.AckPolicy != jetstream.AckExplicitPolicy:
		return nil, fmt.Errorf("%w: the consumer %s acks %s (want explicit); remove it (nats consumer rm %s %s) while no worker runs",
			ErrSettings, Consumer, cfg.AckPolicy, Stream, Consumer)
	case cfg.AckWait != lease:
		return nil, fmt.Errorf("%w: the consumer %s has an ack wait of %s, the fleet's lease, and this worker's --lease is %s: give every worker the same --lease, or remove the consumer (nats consumer rm %s %s) while no worker runs",
			ErrSettings, Consumer, cfg.AckWait, lease, Stream, Consumer)
	case cfg.MaxAckPending > 0 && cfg.MaxAckPending < maxRuns:
		return nil, fmt.Errorf("%w: the consumer %s lets %d runs out at once, fewer than --max-runs %d", ErrSettings, Consumer, cfg.MaxAckPending, maxRuns)
	}
	return cons, nil
}

// Run takes runs while it has room until ctx ends, then stops its runs'
// agents and hands their runs back to the queue, and returns once they are
// stopped.
func (w *Worker) Run(ctx context.Context) error {
	slots := make(chan struct{}, w.opt.MaxRuns)
	var wg sync.WaitGroup
	defer wg.Wait()
	w.log.Info("taking runs", "workdir", w.opt.Workdir, "max_runs", w.opt.MaxRuns, "lease", w.opt.Lease)
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		msg := w.next(ctx)
		if msg == nil {
			return nil
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			w.handle(ctx, msg)
		}()
	}
}

// next waits for a run on the queue; nil once ctx ends.
func (w *Worker) next(ctx context.Context) jetstream.Msg {
	pause := 100 * time.Millisecond
	for {
		if ctx.Err() != nil {
			return nil
		}
		wait, cancel := context.WithTimeout(ctx, 5*time.Second)
		msg, err := w.cons.Next(jetstream.FetchContext(wait))
		cancel()
		switch {
		case err == nil:
			return msg
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
			pause = 100 * time.Millisecond
			continue
		}
		w.log.Warn("waiting for runs", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}
