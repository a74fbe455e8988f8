package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The fleet's view and its commands act through the bucket. A command for a
// run a worker holds is a key of its own (ControlKeys) that the worker
// watches, never a field of the run's record: the record is the lease, and a
// write to it by anyone but the holder would read to the holder as its lease
// lost. Each command is a new key, never a write over one waiting, so that
// commands given before the worker acts, or while no worker holds the run,
// wait side by side, in the order given. A command is kept in the bucket
// until the worker has acted on it, so a worker that dies first leaves it to
// the next holder.

// List returns every run's record, by name, without its state and plan.
func List(ctx context.Context, c *Conn) ([]Record, error) {
	lister, err := c.KV.ListKeysFiltered(ctx, RunKey(">"))
	if err != nil {
		return nil, jsErr("list runs", err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	var out []Record
	for _, k := range keys {
		rec, _, err := get(ctx, c, strings.TrimPrefix(k, "run."))
		if errors.Is(err, ErrNoRun) {
			continue // removed since it was listed
		}
		if err != nil {
			return nil, err
		}
		rec.State, rec.Job = nil, nil
		out = append(out, rec)
	}
	slices.SortFunc(out, func(a, b Record) int { return strings.Compare(a.Run, b.Run) })
	return out, nil
}

// Get returns run's record.
func Get(ctx context.Context, c *Conn, run string) (Record, error) {
	rec, _, err := get(ctx, c, run)
	return rec, err
}

func get(ctx context.Context, c *Conn, run string) (Record, uint64, error) {
	entry, err := c.KV.Get(ctx, RunKey(run))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return Record{}, 0, fmt.Errorf("%w %q (stepseq runs --nats lists them)", ErrNoRun, run)
	case err != nil:
		return Record{}, 0, jsErr("read run "+run, err)
	}
	rec, err := decodeRecord(entry.Value())
	return rec, entry.Revision(), err
}

// Close closes run: a queued one at once, in its record; a running one by its
// worker, which stops its agent, pushes what it has and records it closed.
// The record returned is the run's when the command was given.
func Close(ctx context.Context, c *Conn, run, by string) (Record, error) {
	for range 5 {
		rec, rev, err := get(ctx, c, run)
		if err != nil {
			return Record{}, err
		}
		switch rec.Status {
		case StatusDone, StatusClosed:
			return rec, fmt.Errorf("%w: %s is %s", ErrRunEnded, run, rec.Status)
		case StatusQueued, StatusBlocked:
			// No worker holds it: the record is closed here, and a worker
			// that takes its message finds it closed.
			rec.Status, rec.Reason, rec.Updated = StatusClosed, "closed by "+by, time.Now().UTC()
			if _, lost, err := putRecord(ctx, c, run, rec, rev, "close run "+run); lost {
				continue // a worker took it meanwhile
			} else if err != nil {
				return Record{}, err
			}
			// Commands its last holder left unacted end with it; one left
			// behind is never acted on, the run being closed.
			_, _ = dropCommands(ctx, c, run)
			return rec, nil
		default:
			return rec, command(ctx, c, run, Control{Close: true, By: by})
		}
	}
	return Record{}, keptChanging("close run", run)
}

// Retry gives step of run a new try. A running run's worker queues it as
// stepseq retry does; a blocked run goes back on the queue, resumed from its
// newest state with step retried (step "": resumed as it is, for a run the
// fleet blocked before a step did).
func Retry(ctx context.Context, c *Conn, run, step, by string) (Record, error) {
	for range 5 {
		rec, rev, err := get(ctx, c, run)
		if err != nil {
			return Record{}, err
		}
		switch rec.Status {
		case StatusDone, StatusClosed:
			return rec, fmt.Errorf("%w: %s is %s", ErrRunEnded, run, rec.Status)
		case StatusQueued:
			return rec, fmt.Errorf("%s is queued: it has not run yet, nothing to retry", run)
		case StatusRunning:
			if step == "" {
				return rec, fmt.Errorf("%s is running: name the step to give a new try", run)
			}
			return rec, command(ctx, c, run, Control{Retry: step, By: by})
		}
		if rec.Job == nil {
			return rec, fmt.Errorf("%s's record holds no plan to queue again (made by hand?): submit it again", run)
		}
		if step == "" && stateBlocked(rec.State) {
			return rec, fmt.Errorf("%s is blocked by a step: name the step to give a new try (%s)", run, rec.Reason)
		}
		job := *rec.Job
		job.Retry = step
		rec.Status, rec.Reason, rec.Worker, rec.Updated = StatusQueued, "", "", time.Now().UTC()
		if _, lost, err := putRecord(ctx, c, run, rec, rev, "requeue run "+run); lost {
			continue
		} else if err != nil {
			return Record{}, err
		}
		if err := publish(ctx, c, job); err != nil {
			return rec, fmt.Errorf("requeue run %s: %w (its record says queued: retry again once the server answers)", run, err)
		}
		return rec, nil
	}
	return Record{}, keptChanging("retry run", run)
}

// Answer answers a gate of run, a running one: its worker gives the answer to
// its engine, which checks it as stepseq approve does (a gate that does not
// wait is refused there, in the worker's log).
func Answer(ctx context.Context, c *Conn, run string, a GateAnswer, by string) (Record, error) {
	rec, _, err := get(ctx, c, run)
	if err != nil {
		return Record{}, err
	}
	switch rec.Status {
	case StatusDone, StatusClosed:
		return rec, fmt.Errorf("%w: %s is %s", ErrRunEnded, run, rec.Status)
	case StatusRunning:
		return rec, command(ctx, c, run, Control{Answer: &a, By: by})
	}
	return rec, fmt.Errorf("%s is %s: no worker runs it, so no gate waits (a gate asks once a worker runs the run)", run, rec.Status)
}

func stateBlocked(state json.RawMessage) bool {
	if len(state) == 0 {
		return false
	}
	sum, err := summarize(state)
	return err == nil && len(sum.blockers) > 0
}

// command leaves cmd for run's worker, behind the commands waiting already.
func command(ctx context.Context, c *Conn, run string, cmd Control) error {
	if err := CheckRunName(run); err != nil {
		// A '.' or a wildcard in the name would file the command among
		// another run's.
		return fmt.Errorf("command run: %w", err)
	}
	cmd.At = time.Now().UTC()
	data, _ := json.Marshal(cmd)
	if _, err := c.KV.Create(ctx, controlKey(run, commandID(cmd.At)), data); err != nil {
		return jsErr("command run "+run, err)
	}
	return nil
}

// commandID names a command given at: the time, zero-padded to sort as
// text does, and a random part, so that two given at one instant are two.
func commandID(at time.Time) string {
	return fmt.Sprintf("%020d-%s", at.UnixNano(), newID()[:8])
}

// waitingCommands are the keys of the commands waiting for run's worker:
// the one of older versions first, when the bucket holds one, then the
// others in the order given.
func waitingCommands(ctx context.Context, c *Conn, run string) ([]string, error) {
	var keys []string
	switch _, err := c.KV.Get(ctx, legacyControlKey(run)); {
	case err == nil:
		keys = append(keys, legacyControlKey(run))
	case !errors.Is(err, jetstream.ErrKeyNotFound):
		return nil, jsErr("read the commands of run "+run, err)
	}
	lister, err := c.KV.ListKeysFiltered(ctx, ControlKeys(run))
	if err != nil {
		return nil, jsErr("list the commands of run "+run, err)
	}
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	return keys, nil
}

// dropCommands removes the commands waiting for run, an ended run no
// worker will act for, and returns them.
func dropCommands(ctx context.Context, c *Conn, run string) ([]Control, error) {
	keys, err := waitingCommands(ctx, c, run)
	if err != nil {
		return nil, err
	}
	var dropped []Control
	for _, k := range keys {
		en, err := c.KV.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // acted on, or dropped, since it was listed
		}
		if err != nil {
			return dropped, jsErr("read command "+k, err)
		}
		removed, err := removeAt(ctx, c, k, en.Revision())
		if err != nil {
			return dropped, jsErr("remove command "+k, err)
		}
		if !removed {
			continue // written again since it was read: not this one
		}
		var cmd Control
		_ = json.Unmarshal(en.Value(), &cmd)
		dropped = append(dropped, cmd)
	}
	return dropped, nil
}

// WaitEnded waits until run's record says it has ended, or ctx ends.
func WaitEnded(ctx context.Context, c *Conn, run string) (Record, error) {
	w, err := c.KV.Watch(ctx, RunKey(run))
	if err != nil {
		return Record{}, jsErr("watch run "+run, err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return Record{}, ctx.Err()
		case en, ok := <-w.Updates():
			if !ok {
				return Record{}, ctx.Err()
			}
			if en == nil || en.Operation() != jetstream.KeyValuePut {
				continue
			}
			rec, err := decodeRecord(en.Value())
			if err != nil {
				return Record{}, err
			}
			if ended(rec.Status) {
				return rec, nil
			}
		}
	}
}

// putRecord writes rec as run's record over revision rev, which it was read
// at. lost: another write came first (a worker took the run meanwhile), and
// the caller reads the record again.
func putRecord(ctx context.Context, c *Conn, run string, rec Record, rev uint64, what string) (newRev uint64, lost bool, err error) {
	data, _ := json.Marshal(rec)
	newRev, err = c.KV.Update(ctx, RunKey(run), data, rev)
	switch {
	case isMismatch(err):
		return 0, true, nil
	case err != nil:
		return 0, false, jsErr(what, err)
	}
	return newRev, false, nil
}

// keptChanging is a command given up after five reads of a record that
// another write changed each time.
func keptChanging(what, run string) error {
	return fmt.Errorf("%s %s: its record kept changing under five reads", what, run)
}
