package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Conn is a connection to the fleet: the NATS server, its JetStream, the
// stream of runs and the bucket of records, each made when absent.
type Conn struct {
	NC     *nats.Conn
	JS     jetstream.JetStream
	Stream jetstream.Stream
	KV     jetstream.KeyValue
}

// Options are how Dial connects and what it makes when absent.
type Options struct {
	Name string // the client's name, seen in the server's monitoring
	// Replicas of the stream and the bucket when they are made; 0: 1. A
	// cluster of three wants 3, so that a server's death loses nothing.
	Replicas int
	// Timeout bounds the first connection and each request; 0: 5s.
	Timeout time.Duration
	// OnDisconnect, when set, is told each time the connection drops.
	OnDisconnect func(error)
}

// Dial connects to the server at url (one URL, or several separated by
// commas), then opens the stream and the bucket, making them when absent.
func Dial(ctx context.Context, url string, opt Options) (*Conn, error) {
	timeout := opt.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	nopts := []nats.Option{nats.Name(opt.Name), nats.Timeout(timeout), nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond)}
	if opt.OnDisconnect != nil {
		nopts = append(nopts, nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { opt.OnDisconnect(err) }))
	}
	nc, err := nats.Connect(url, nopts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w (is nats-server running there, with -js?)", ErrUnreachable, url, err)
	}
	c, err := Open(ctx, nc, opt)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// Open opens the fleet on a connection made by the caller (Dial makes one).
func Open(ctx context.Context, nc *nats.Conn, opt Options) (*Conn, error) {
	c := &Conn{NC: nc}
	timeout := opt.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	if err := c.open(ctx, opt, timeout); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Conn) open(ctx context.Context, opt Options, timeout time.Duration) error {
	js, err := jetstream.New(c.NC, jetstream.WithDefaultTimeout(timeout))
	if err != nil {
		return err
	}
	c.JS = js
	replicas := max(opt.Replicas, 1)
	ctx, cancel := context.WithTimeout(ctx, 4*timeout)
	defer cancel()
	if c.Stream, err = ensureStream(ctx, js, replicas); err != nil {
		return err
	}
	c.KV, err = ensureBucket(ctx, js, replicas)
	return err
}

// Close closes the connection.
func (c *Conn) Close() { c.NC.Close() }

// ensureStream opens the work queue of runs, making it when absent. One made
// with a retention, subjects or an age limit the fleet cannot work with is an
// error naming them: changing it could drop the runs it holds.
func ensureStream(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.Stream, error) {
	s, err := js.Stream(ctx, Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s, err = js.CreateStream(ctx, jetstream.StreamConfig{
			Name: Stream, Subjects: []string{subjects}, Retention: jetstream.WorkQueuePolicy,
			Storage: jetstream.FileStorage, Replicas: replicas, Duplicates: 10 * time.Minute,
			Description: "stepseq: runs waiting for a worker",
		})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			s, err = js.Stream(ctx, Stream) // another stepseq made it first
		}
	}
	if err != nil {
		return nil, jsErr("stream "+Stream, err)
	}
	cfg := s.CachedInfo().Config
	var bad []string
	if cfg.Retention != jetstream.WorkQueuePolicy {
		bad = append(bad, fmt.Sprintf("retention %s (want workqueue)", cfg.Retention))
	}
	if !slices.Equal(cfg.Subjects, []string{subjects}) {
		bad = append(bad, fmt.Sprintf("subjects %v (want [%s])", cfg.Subjects, subjects))
	}
	if cfg.MaxAge != 0 {
		bad = append(bad, fmt.Sprintf("max age %s (want none: a run waiting longer would be lost)", cfg.MaxAge))
	}
	if cfg.MaxMsgs > 0 || cfg.MaxBytes > 0 {
		bad = append(bad, fmt.Sprintf("limits of %d messages, %d bytes (want none: a run over them would be lost)", cfg.MaxMsgs, cfg.MaxBytes))
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("%w: the stream %s has %s; remove it (nats stream rm %s) for stepseq to make it, or point --nats at another server",
			ErrSettings, Stream, joinAnd(bad), Stream)
	}
	return s, nil
}

// ensureBucket opens the bucket of run records, making it when absent. One
// whose values expire would forget runs, and is refused.
func ensureBucket(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: Bucket, History: 8, Storage: jetstream.FileStorage, Replicas: replicas,
			Description: "stepseq: each run's record and newest state",
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, Bucket)
		}
	}
	if err != nil {
		return nil, jsErr("bucket "+Bucket, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, jsErr("bucket "+Bucket, err)
	}
	if ttl := st.TTL(); ttl != 0 {
		return nil, fmt.Errorf("%w: the bucket %s keeps values for %s only (want no limit: a run's record would be lost); remove it (nats kv rm %s) for stepseq to make it",
			ErrSettings, Bucket, ttl, Bucket)
	}
	return kv, nil
}

// jsErr says that what failed is JetStream's, and when the server has none.
func jsErr(what string, err error) error {
	if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, nats.ErrJetStreamNotEnabled) {
		return fmt.Errorf("%s: %w: the server runs without JetStream; start it with -js", what, err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) {
		return fmt.Errorf("%s: %w: %w (no JetStream answered; a cluster without a quorum cannot answer)", what, ErrUnreachable, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func joinAnd(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	out := ""
	for i, s := range items {
		switch {
		case i == 0:
		case i == len(items)-1:
			out += " and "
		default:
			out += ", "
		}
		out += s
	}
	return out
}
