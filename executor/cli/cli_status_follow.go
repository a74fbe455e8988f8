package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/stepseq/stepseq/executor/notify"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
	"github.com/stepseq/stepseq/watcher"
)

// statusFollow is one `status --follow`: what was shown last and what it waits on.
type statusFollow struct {
	v      *statusView
	settle time.Duration

	// What the workspace's paths are, relative to it.
	stateRel, plansRel, feedRel string

	started  bool // the first read is done
	blocked  bool // the last report shown was of a blocked plan
	last     []byte
	lastSt   *planspec.State
	pending  error     // the last read did not parse
	invalid  time.Time // when pending is reported, if no valid state comes first
	gone     bool      // the state file is missing; said once
	nextTick time.Time // while a step runs on a terminal: the next redraw
}

// followChanges prints the report, then again on every change of the state file,
// until the plan is DONE or ctx ends. A blocked plan is followed on: a retry, an
// answer or a budget raised moves it again, from another terminal, and an
// interrupt then ends with status's exit 1. The state file is followed in
// its folder (it is replaced by rename, and may not exist yet), with the plan
// records (a plan rejected or fixed changes the report's list of rejected plans)
// and the notifications feed. A state that does not parse may be a write in
// progress: it is reported only when no valid content follows within settle.
// While a step runs on a terminal its duration is redrawn each tick; with nothing
// running nothing wakes and no CPU is spent.
func (v *statusView) followChanges(ctx context.Context, settle time.Duration) error {
	ws := v.rt.WS
	f := &statusFollow{v: v, settle: settle, stateRel: filepath.Base(ws.State),
		plansRel: relTo(ws.Dir, ws.PlansDir()), feedRel: relTo(ws.Dir, filepath.Join(filepath.Dir(ws.JournalPath()), notify.FeedName))}
	cfg := watcher.Config{Root: ws.Dir, Paths: []string{f.stateRel, f.plansRel, f.feedRel}, Settle: time.Millisecond, Logger: v.log}
	err := watcher.Follow(ctx, cfg, f.changed)
	if errors.Is(err, fs.ErrNotExist) && !f.started { // no folder to watch
		return &exitError{code: 2, err: store.NoFolder(ws.Dir)}
	}
	if err == nil && f.blocked {
		return errBlocked // interrupted while blocked: status's answer for it
	}
	return err
}

// relTo is path relative to dir, slash-separated.
func relTo(dir, path string) string {
	rel, err := filepath.Rel(dir, path)
	if err != nil {
		return filepath.ToSlash(path)
	}
	return filepath.ToSlash(rel)
}

// changed takes one batch of changes (nil: the start, or a wait asked for is
// over) and says when to wake without one, and whether following is over.
func (f *statusFollow) changed(b *watcher.Batch) (time.Duration, bool, error) {
	end, err := f.take(b)
	if end || err != nil {
		return 0, true, err
	}
	return f.wake(), false, nil
}

func (f *statusFollow) take(b *watcher.Batch) (bool, error) {
	if b == nil {
		return f.timeUp()
	}
	state, plans, feed := b.Rescan, b.Rescan, b.Rescan
	for _, p := range b.Paths {
		switch {
		case p == f.stateRel:
			state = true
		case p == f.feedRel:
			feed = true
		case strings.HasPrefix(p, f.plansRel+"/") && !strings.HasPrefix(filepath.Base(p), "."):
			plans = true // a record's temporary file (a dot file) is no record yet
		}
	}
	steps := []struct {
		due bool
		fn  func() (bool, error)
	}{{state, f.update}, {plans, f.plansChanged}, {feed, f.feedChanged}}
	for _, s := range steps {
		if !s.due {
			continue
		}
		if end, err := s.fn(); end || err != nil {
			return end, err
		}
	}
	return false, nil
}

// timeUp is the start, a redraw due, or the grace of an invalid state over.
func (f *statusFollow) timeUp() (bool, error) {
	now := time.Now()
	switch {
	case !f.started:
		f.started = true
		return f.update() // read after the watch is set, so no change goes unseen
	case f.pending != nil && !now.Before(f.invalid):
		if f.v.printed == 0 {
			return true, f.pending
		}
		f.v.log.Warn("the state file is not valid; showing the last valid one", "err", f.pending)
		f.pending = nil
	case !f.nextTick.IsZero() && !now.Before(f.nextTick):
		return f.show(f.last, f.lastSt)
	}
	return false, nil
}

// wake is how long until the next thing due without a change: the grace of an
// invalid state, or a redraw; 0 when nothing is.
func (f *statusFollow) wake() time.Duration {
	at := f.nextTick
	if f.pending != nil && (at.IsZero() || f.invalid.Before(at)) {
		at = f.invalid
	}
	if at.IsZero() {
		return 0
	}
	return max(time.Until(at), time.Millisecond)
}

// update reads the state file and shows it when it changed.
func (f *statusFollow) update() (bool, error) {
	v := f.v
	data, st, err := v.load()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		f.pending = nil
		if !f.gone {
			f.gone = true
			if v.printed == 0 {
				v.log.Info("waiting for the state file to appear", "state", v.state)
			} else {
				v.log.Warn("the state file was removed; waiting for a new one", "state", v.state)
			}
		}
		return false, nil
	case err != nil && v.printed == 0 && !errors.Is(err, planspec.ErrInvalidState):
		return true, err // not a state file at all: a folder, or too large
	case err != nil:
		if f.pending == nil {
			f.invalid = time.Now().Add(f.settle)
		}
		f.pending = err
		return false, nil
	}
	f.pending, f.gone = nil, false
	if sha256.Sum256(data) == v.shown && v.printed > 0 {
		return false, nil
	}
	return f.show(data, st)
}

// show prints the report; it says whether following ends, and how.
func (f *statusFollow) show(data []byte, st *planspec.State) (bool, error) {
	v := f.v
	f.last, f.lastSt = data, st
	r, err := v.print(data, st, v.rt.Now())
	if errors.Is(err, planspec.ErrInvalidState) {
		v.log.Warn("the state file has invalid conditions", "err", err)
		err = nil // shown; a later edit may fix it
	}
	f.blocked = blocked(r)
	switch {
	case err != nil:
		return true, err
	case r.Status == planspec.StatusDone:
		return true, nil
	}
	f.nextTick = time.Time{}
	if running(r) && v.tty && !v.json {
		f.nextTick = time.Now().Add(v.tick)
	}
	return false, nil
}

// plansChanged shows the report again when the list of rejected plans changed:
// a record rewritten with the same verdict is no news.
func (f *statusFollow) plansChanged() (bool, error) {
	if f.lastSt == nil || fmt.Sprint(f.v.rejected(f.lastSt)) == f.v.rejectedShown {
		return false, nil
	}
	return f.show(f.last, f.lastSt)
}

// feedChanged shows notifications that came since the last report: on a pipe,
// as lines of their own after it; on a terminal or as JSON, in the report again.
func (f *statusFollow) feedChanged() (bool, error) {
	v := f.v
	if f.lastSt == nil {
		return false, nil
	}
	notes, err := notify.Since(v.rt.WS.Dir, v.noteShown, notesShown)
	if err != nil || len(notes) == 0 {
		return false, nil
	}
	if v.tty || v.json {
		return f.show(f.last, f.lastSt)
	}
	var b bytes.Buffer
	now := v.rt.Now()
	for _, n := range notes {
		writeNote(&b, n, now)
	}
	v.noteShown = notes[len(notes)-1].ID
	_, err = v.out.Write(b.Bytes())
	return false, err
}
