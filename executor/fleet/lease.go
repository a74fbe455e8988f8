package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// lease is a worker's hold on a run: the record's revision it last wrote. Every
// write is a compare-and-set on that revision, so a worker whose run another
// worker took (its lease ran out while it was silent) finds out at its next
// write. A worker that cannot write for half the lease counts its lease as
// lost too: JetStream gives the run to another worker once the whole lease
// has passed, and the agent must be stopped before then.
type lease struct {
	kv  jetstream.KeyValue
	key string
	ttl time.Duration

	mu  sync.Mutex // orders the writes: each needs the revision of the one before
	rev uint64
	rec Record

	renewed atomic.Int64 // when a write last succeeded, unix ns, on this machine's clock
}

// takeLease makes job's record say that worker runs it, by compare-and-set on
// the revision read. skip is true, with the record as it is, when the run is
// not to be run: it has ended, or the record is another run's of that name.
func takeLease(ctx context.Context, kv jetstream.KeyValue, job Job, worker string, ttl time.Duration) (l *lease, skip bool, prev Record, err error) {
	key := RunKey(job.Run)
	for range 5 {
		entry, err := kv.Get(ctx, key)
		var rev uint64
		var rec Record
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			// A record removed by hand: the message is the run.
			rec = Record{ID: job.ID, Run: job.Run, Repo: job.Repo, Branch: job.Branch, Status: StatusQueued}
		case err != nil:
			return nil, false, Record{}, jsErr("read the run's record", err)
		default:
			if rec, err = decodeRecord(entry.Value()); err != nil {
				return nil, false, Record{}, err
			}
			rev = entry.Revision()
		}
		if rec.ID != job.ID || ended(rec.Status) {
			return nil, true, rec, nil
		}
		prev = rec
		rec.Status, rec.Worker, rec.Reason = StatusRunning, worker, ""
		rec.Attempt++
		now := time.Now().UTC()
		rec.Updated, rec.Renewed = now, now
		data, _ := json.Marshal(rec)
		if rev == 0 {
			rev, err = kv.Create(ctx, key, data)
		} else {
			rev, err = kv.Update(ctx, key, data, rev)
		}
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue // written meanwhile (a close, another worker): judge it again
		}
		if err != nil {
			return nil, false, Record{}, jsErr("take the run", err)
		}
		l = &lease{kv: kv, key: key, ttl: ttl, rev: rev, rec: rec}
		l.renewed.Store(time.Now().UnixNano())
		return l, false, prev, nil
	}
	return nil, false, Record{}, fmt.Errorf("take the run: its record kept changing under five reads")
}

// silent is how long since a write last succeeded.
func (l *lease) silent() time.Duration {
	return time.Since(time.Unix(0, l.renewed.Load()))
}

// expiring reports whether the lease must be taken as lost: half of it has
// passed without a write.
func (l *lease) expiring() bool { return l.silent() > l.ttl/2 }

// update writes the record changed by change, by compare-and-set. A write that
// finds another revision is ErrLeaseLost; so is any failure once the lease
// is expiring.
func (l *lease) update(ctx context.Context, change func(*Record)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	rec := l.rec
	change(&rec)
	now := time.Now().UTC()
	rec.Updated, rec.Renewed = now, now
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, max(l.ttl/4, 100*time.Millisecond))
	defer cancel()
	rev, err := l.kv.Update(wctx, l.key, data, l.rev)
	if isMismatch(err) && l.adopt(wctx) {
		rev, err = l.kv.Update(wctx, l.key, data, l.rev)
	}
	switch {
	case isMismatch(err):
		return fmt.Errorf("%w: the run's record was written by another (revision %d is not the last)", ErrLeaseLost, l.rev)
	case err != nil && l.expiring():
		return fmt.Errorf("%w: no write for %s: %w", ErrLeaseLost, l.silent().Round(time.Millisecond), err)
	case err != nil:
		return jsErr("write the run's record", err)
	}
	l.rev, l.rec = rev, rec
	l.renewed.Store(time.Now().UnixNano())
	return nil
}

func isMismatch(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)
}

// adopt takes the record's last revision as this lease's own when the record
// still names this holder and this attempt: a write whose answer was lost
// (a timeout while the cluster chose a leader) may have been applied all
// the same. Another worker taking the run counts another attempt.
func (l *lease) adopt(ctx context.Context) bool {
	entry, err := l.kv.Get(ctx, l.key)
	if err != nil {
		return false
	}
	cur, err := decodeRecord(entry.Value())
	if err != nil || cur.Worker != l.rec.Worker || cur.Attempt != l.rec.Attempt || cur.Status != l.rec.Status || cur.ID != l.rec.ID {
		return false
	}
	l.rev = entry.Revision()
	return true
}
