package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// A run's commands are a queue in the bucket: each a key of its own, acted
// on by the run's holder in the order given and removed once acted on, so
// that a next holder acts only on what still waits. A retry, an answer or a
// budget change is handed to the engine under the command's id (its key's
// last part); the engine lists the id in the state in the write that holds
// the command's effect, and the key leaves the bucket only once a state
// mirrored there lists it. Those waiting when a holder starts are made
// before its sidecar starts; one that comes while the sidecar runs is made
// between agents. A holder that dies before the state that holds a command
// is in the bucket leaves it to the next, which makes it; one that dies
// after, but before the key is removed, leaves a key whose id the state
// lists: the next holder removes it, not acted on again. Each command is
// thus made once across holders.

// commandOf is the id of the command under key for run: "" for the single
// key older versions wrote, whose command is removed once acted on.
func commandOf(run, key string) string {
	id, ok := strings.CutPrefix(key, controlKey(run, ""))
	if !ok {
		return ""
	}
	return id
}

// readApplied takes, as the holder starts, the ids of the commands the
// run's state, restored or started, holds applied.
func (r *runner) readApplied() {
	data, err := r.e.readState()
	if err != nil {
		return
	}
	if sum, err := summarize(data); err == nil {
		r.applied = sum.applied
	}
}

// removeHanded takes from the bucket the commands handed to the engine
// whose ids applied, the list of the state just mirrored, holds.
func (r *runner) removeHanded(ctx context.Context, applied []string) {
	r.applied = applied
	left := r.handed[:0]
	for _, c := range r.handed {
		if slices.Contains(applied, commandOf(r.job.Run, c.key)) {
			r.removeCommand(ctx, c)
		} else {
			left = append(left, c)
		}
	}
	r.handed = left
}

// sendLegacyControl hands the mirror's goroutine the command an older
// version left under the run's single key, when the bucket holds one; false
// once ctx has ended.
func (r *runner) sendLegacyControl(ctx context.Context, out chan<- controlEntry) bool {
	en, err := r.w.c.KV.Get(ctx, legacyControlKey(r.job.Run))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return true
	case err != nil:
		r.log.Warn("the run's command under its older key not read: its next holder reads it", "key", legacyControlKey(r.job.Run), "err", err)
		return ctx.Err() == nil
	}
	return r.sendControl(ctx, out, en)
}

// sendControl hands en, a command for the run (nil: the ones that waited
// are all delivered), to whoever acts on them; false once ctx has ended.
func (r *runner) sendControl(ctx context.Context, out chan<- controlEntry, en jetstream.KeyValueEntry) bool {
	var c controlEntry
	switch {
	case en == nil:
		c.caughtUp = true
	case en.Operation() != jetstream.KeyValuePut:
		return true
	default:
		if err := json.Unmarshal(en.Value(), &c.Control); err != nil {
			r.log.Warn("a command for the run that is not JSON: ignored", "key", en.Key(), "err", err)
			return true
		}
		c.key, c.rev = en.Key(), en.Revision()
	}
	select {
	case out <- c:
		return true
	case <-ctx.Done():
		return false
	}
}

// actOnWaiting acts, in order, on the commands that wait for the run as its
// holder starts, before its sidecar does; it returns those whose keys are to
// leave the bucket once the state that holds them is written there.
func (r *runner) actOnWaiting(ctx context.Context, controls <-chan controlEntry) []controlEntry {
	var acted []controlEntry
	if controls == nil {
		return nil // not watched: said in the log
	}
	for {
		select {
		case <-ctx.Done():
			return acted
		case c, ok := <-controls:
			if !ok || c.caughtUp {
				return acted
			}
			if r.control(ctx, c) {
				acted = append(acted, c)
			}
		}
	}
}

// removeCommands takes the commands acted on from the bucket.
func (r *runner) removeCommands(ctx context.Context, acted []controlEntry) {
	for _, c := range acted {
		r.removeCommand(ctx, c)
	}
}

// removeCommand takes c, acted on, from the bucket, by its revision. One
// that cannot be removed now is tried again before the next state is
// written.
func (r *runner) removeCommand(ctx context.Context, c controlEntry) {
	if _, err := removeAt(ctx, r.w.c, c.key, c.rev); err != nil {
		r.log.Warn("a command acted on not removed from the bucket: tried again before the next state is written", "command", c.Control.String(), "err", err)
		r.unremoved = append(r.unremoved, c)
	}
}

// retryRemovals tries again to remove the commands acted on that the
// bucket still holds.
func (r *runner) retryRemovals(ctx context.Context) {
	left := r.unremoved[:0]
	for _, c := range r.unremoved {
		if _, err := removeAt(ctx, r.w.c, c.key, c.rev); err != nil {
			left = append(left, c)
		}
	}
	r.unremoved = left
}

// removeAt removes the command under key as it was read, at revision rev;
// one written again since is another command, and stays (removed false).
func removeAt(ctx context.Context, c *Conn, key string, rev uint64) (removed bool, err error) {
	err = c.KV.Delete(ctx, key, jetstream.LastRevision(rev))
	if isMismatch(err) {
		return false, nil
	}
	return err == nil, err
}

// dropCommands removes the commands that still wait for the run once it has
// ended with status done or closed: no worker acts for it any more. Each but
// a close is said in the log. A blocked run's wait for the holder a retry
// gives it.
func (r *runner) dropCommands(ctx context.Context, status string) {
	if status != StatusDone && status != StatusClosed {
		return
	}
	dropped, err := dropCommands(ctx, r.w.c, r.job.Run)
	for _, c := range dropped {
		if !c.Close {
			r.log.Warn("a command given as the run ended: not acted on", "command", c.String(), "by", c.By, "at", c.At)
		}
	}
	if err != nil {
		r.log.Warn("the ended run's commands not all removed from the bucket", "err", err)
	}
}

// String says what c asks, for the log.
func (c Control) String() string {
	var parts []string
	if c.Close {
		parts = append(parts, "close")
	}
	if c.Retry != "" {
		parts = append(parts, "retry "+c.Retry)
	}
	if a := c.Answer; a != nil {
		word := "reject"
		if a.Approve {
			word = "approve"
		}
		parts = append(parts, strings.TrimSpace(word+" "+a.Step))
	}
	if b := c.Budget; b != nil {
		words := []string{"budget"}
		if b.Step != "" {
			words = append(words, b.Step)
		}
		parts = append(parts, strings.Join(append(words, strings.Join(b.Changes, ",")), " "))
	}
	return strings.Join(parts, "; ")
}
