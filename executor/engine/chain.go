package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// ErrStepFailed is returned by Step when the step it ran ended FAILED, so that the
// command exits 1 as the original runner does.
var ErrStepFailed = errors.New("executor: step failed")

// Chain drives a plan in one process the way the heartbeat's check script and
// runner do, without nesting processes: each step's agent is launched from here and
// the chain goes on until the plan is DONE, blocked, or waiting on a gate. It is the
// state machine driven until it settles.
type Chain struct {
	*Runtime
	// OpenNotifier, when set, is called once the workspace lock is held, with the
	// state read; the chain's transitions go to the notifier it returns (nil: none),
	// and done is called before the lock is released.
	OpenNotifier func(st *planspec.State) (n Notifier, done func())

	// beforeLock, when set, runs between the first read of the state and the
	// lock: tests put there what a stepseq that held the lock did before it died.
	beforeLock func()
}

// Check is `stepseq check`: the heartbeat's check, then the whole chain.
func (c *Chain) Check(ctx context.Context) error { return c.run(ctx, false) }

// Step is `stepseq step`: run the current step whatever its status, as the original
// runner does, then go on as Check. It returns ErrStepFailed when that step failed.
func (c *Chain) Step(ctx context.Context) error { return c.run(ctx, true) }

func (c *Chain) run(ctx context.Context, force bool) error {
	kind := "check"
	if force {
		kind = "step"
	}
	sf := &store.StateFile{Path: c.WS.State}
	st, err := sf.Preread()
	if errors.Is(err, fs.ErrNotExist) {
		c.Logger.Debug("no state file: nothing to do", "state", c.WS.State)
		return nil
	}
	if err != nil {
		return err
	}
	if !force && st.Status == planspec.StatusDone {
		return nil
	}
	maxRetries, err := proc.MaxRetriesFromEnv(c.Getenv)
	if err != nil {
		return err
	}
	if c.beforeLock != nil {
		c.beforeLock()
	}
	lock, holder, err := store.TryLock(c.WS, kind)
	if errors.Is(err, store.ErrLocked) {
		return c.handOff(holder)
	}
	if err != nil {
		return err
	}
	c.Lock = lock
	defer func() {
		c.Lock = nil
		lock.Unlock()
	}()
	// The state read before the lock may be older than the file: the stepseq
	// that held the lock may have gone on and died between that read and this
	// lock. Decided from the older state, a step it finished would look
	// interrupted (its try lock's record reused by the next step) and run again.
	// An unchanged file costs a read and a comparison, no parse.
	if now, changed, err := sf.ReadIfChanged(); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	} else if changed && now != nil {
		st = now
	}
	if !force && st.Status == planspec.StatusDone {
		return nil
	}

	d := newDriver(ctx, c.Runtime, sf, lock, core.MachineConfig{Driver: kind, MaxRetries: maxRetries, StampHeartbeat: true})
	d.returnsConfigErr = true // Err, which main prints
	if c.OpenNotifier != nil {
		n, done := c.OpenNotifier(st)
		d.notifier = n
		defer done()
	}
	d.wcfg.Settle = time.Millisecond
	defer d.closeWatcher()
	defer d.timer.Stop()
	defer d.endGroups()
	c.begin(d, st, force)
	if err := settle(ctx, d); err != nil {
		return err
	}
	if err := d.m.Err(); err != nil {
		return err
	}
	c.Logger.Info("chain stops", "action", d.m.Decision().Action.String(), "step", d.m.Decision().Step, "reason", d.m.Decision().Reason)
	if d.m.ForcedFailed() {
		return ErrStepFailed
	}
	return nil
}

// begin hands the machine what a chain starts from: the queued triggers, the
// runner's "run the current step", and the state read.
func (c *Chain) begin(d *driver, st *planspec.State, force bool) {
	ts, errs := DrainTriggers(c.WS)
	for _, err := range errs {
		c.Logger.Warn("ignored a trigger", "err", err)
	}
	if force {
		d.feed(core.RunCurrent{})
	}
	if len(ts) > 0 {
		d.feed(core.TriggersIn{Triggers: ts})
	}
	d.feed(core.StateRead{State: st})
}

// settle drives the machine until it settles: agent exits, timers and file
// changes in, one at a time. A chain ended by ctx stops its agent.
func settle(ctx context.Context, d *driver) error {
	for !d.m.Settled() {
		select {
		case <-ctx.Done():
			if d.active != nil {
				d.stopActive()
			}
			return ctx.Err()
		case exit := <-d.exits():
			d.finish(exit)
		case <-d.timer.C:
			d.feed(core.TimerFired{})
		case b, ok := <-d.batches():
			if ok {
				d.batch(b)
			}
		case <-d.watchErrors():
		}
	}
	return nil
}

// handOff deals with a workspace another stepseq holds: a sidecar gets a trigger
// and does the work; a running check already does it.
func (c *Chain) handOff(h *store.Holder) error {
	if h != nil && h.Kind == "watch" {
		if err := WriteTrigger(c.WS, core.Trigger{From: "check"}); err != nil {
			return err
		}
		c.Logger.Info("a stepseq sidecar runs this workspace: handed the check to it", "pid", h.PID)
		return nil
	}
	pid := 0
	if h != nil {
		pid = h.PID
	}
	c.Logger.Info("another stepseq is running this plan: nothing launched", "pid", pid)
	return nil
}

// WriteTrigger queues t under .stepseq/triggers/, atomically: the sidecar never
// sees half a trigger.
func WriteTrigger(ws store.Workspace, t core.Trigger) error {
	if t.At == "" {
		t.At = planspec.FormatISO(time.Now())
	}
	dir := ws.TriggersDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("trigger: %w", err)
	}
	data, _ := json.Marshal(t)
	name := strconv.FormatInt(time.Now().UnixNano(), 10) + "-" + strconv.Itoa(os.Getpid()) + ".json"
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("trigger: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("trigger: %w", err)
	}
	return nil
}
