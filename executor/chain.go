package executor

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

	"github.com/stepseq/stepseq/planspec"
	"github.com/stepseq/stepseq/watcher"
)

// ErrStepFailed is returned by Step when the step it ran ended FAILED, so that the
// command exits 1 as the original runner does.
var ErrStepFailed = errors.New("executor: step failed")

// Chain drives a plan in one process the way the heartbeat's check script and
// runner do, without nesting processes: each step's agent is launched from here and
// the chain goes on until the plan is DONE, blocked, or waiting on a gate.
type Chain struct {
	*Runtime

	// conds are the compiled conditions of condsOf, the state last read: the chain
	// never edits a state's steps, so they hold until the file is read again.
	conds   *Conditions
	condsOf *planspec.State
}

func (c *Chain) conditions(st *planspec.State) (*Conditions, error) {
	if c.condsOf != st {
		conds, err := c.Conditions(st)
		if err != nil {
			return nil, err
		}
		c.conds, c.condsOf = conds, st
	}
	return c.conds, nil
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
	sf := &StateFile{Path: c.WS.State}
	st, err := sf.Read()
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
	maxRetries, err := MaxRetriesFromEnv(c.Getenv)
	if err != nil {
		return err
	}
	lock, holder, err := TryLock(c.WS, kind)
	if errors.Is(err, ErrLocked) {
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

	if triggered, err := c.applyTriggers(sf); err != nil {
		return err
	} else if triggered != nil {
		st = triggered
	}
	first := force
	firstFailed, progressed := false, false
	current := false // st is what the file holds: read after the last agent
	for {
		if !current {
			fresh, changed, err := sf.ReadIfChanged()
			if err != nil {
				return err
			}
			if changed {
				st = fresh
			}
		}
		current = false
		now := c.now()
		facts := Facts{Now: now, MaxRetries: maxRetries, Alive: lock.AgentAlive}
		conds, err := c.conditions(st)
		if err != nil {
			return err
		}
		facts.Cond = conds.Cond
		var d Decision
		if first {
			var ok bool
			if d, ok = runnerDecision(st, now); !ok {
				return nil
			}
		} else {
			d, _ = Reconcile(st, facts)
		}
		st.LastHeartbeatIso = planspec.FormatISO(now)
		c.record(Entry{Event: "decide", Step: d.Step, Reason: d.Reason, Detail: map[string]any{"action": d.Action.String(), "driver": kind}})

		switch d.Action {
		case Launch:
			l, err := c.PrepareLaunch(st, d, now)
			if err != nil {
				// A configuration error touches nothing of this step; what earlier
				// steps of this chain achieved is kept.
				if progressed {
					if werr := sf.Write(st); werr != nil {
						return errors.Join(err, werr)
					}
				}
				return err
			}
			if err := sf.Write(st); err != nil {
				return err
			}
			v, err := c.runTry(ctx, sf, &st, l)
			if err != nil {
				return err
			}
			if first && !v.OK {
				firstFailed = true
			}
			first, progressed, current = false, true, true
		case Delayed:
			if err := sf.Write(st); err != nil {
				return err
			}
			c.Logger.Info("waiting for stepDelayMinutes", "step", d.Step, "until", d.At.Format(time.RFC3339))
			if err := sleepUntil(ctx, d.At, c.now); err != nil {
				return err
			}
			// The runner, once its delay is over, still runs its step whatever it is.
		default:
			if err := sf.Write(st); err != nil {
				return err
			}
			c.Logger.Info("chain stops", "action", d.Action.String(), "step", d.Step, "reason", d.Reason)
			if firstFailed {
				return ErrStepFailed
			}
			return nil
		}
	}
}

// applyTriggers takes the re-runs queued while no stepseq held the workspace.
// It returns the new state, or nil when there was nothing to apply.
func (c *Chain) applyTriggers(sf *StateFile) (*planspec.State, error) {
	ts, errs := DrainTriggers(c.WS)
	for _, err := range errs {
		c.Logger.Warn("ignored a trigger", "err", err)
	}
	var st *planspec.State
	for _, t := range ts {
		if t.Step == "" {
			continue
		}
		if st == nil {
			var err error
			if st, err = sf.Read(); err != nil {
				return nil, err
			}
		}
		if err := Rerun(st, t.Step); err != nil {
			c.Logger.Warn("trigger ignored", "step", t.Step, "err", err)
			continue
		}
		c.record(Entry{Event: "trigger", Step: t.Step, Reason: "trigger from " + t.From})
	}
	if st == nil {
		return nil, nil
	}
	return st, sf.Write(st)
}

// runnerDecision is the original runner's choice: the step at the cursor, whatever
// its status, after stepDelayMinutes for a retry.
func runnerDecision(st *planspec.State, now time.Time) (Decision, bool) {
	if st.CurrentStep >= len(st.StepQueue) {
		return Decision{}, false
	}
	id := st.StepQueue[st.CurrentStep]
	run := st.Run(id)
	if at, ok := readyAt(st, id); ok && now.Before(at) {
		return Decision{Action: Delayed, Step: id, At: at, Reason: "runner: stepDelayMinutes"}, true
	}
	return Decision{Action: Launch, Step: id, Prompt: Prompt(id, st.Steps[id], run), Reason: "runner: current step"}, true
}

// runTry starts the agent, waits for it, and records the verdict on the newest
// state: an agent may edit state.json while it runs, and its edits are kept.
func (c *Chain) runTry(ctx context.Context, sf *StateFile, stp **planspec.State, l Prepared) (Verdict, error) {
	c.Logger.Info("launching agent", "step", l.Step, "try", l.Try)
	var exit Exit
	running, err := c.Start(l)
	if err != nil {
		exit = startFailure(err)
	} else {
		select {
		case exit = <-running.Done():
		case <-ctx.Done():
			running.Stop()
			exit = <-running.Done()
			c.Finished(running, exit)
			c.record(Entry{Event: "interrupted", Step: l.Step, Try: l.Try, Reason: "stepseq stopped"})
			return Verdict{}, ctx.Err()
		}
		c.Finished(running, exit)
	}
	fresh, err := c.rereadAfterAgent(ctx, sf)
	if err != nil {
		return Verdict{}, err
	}
	if fresh != nil {
		*stp = fresh
	}
	st := *stp
	if _, ok := st.Steps[l.Step]; !ok {
		c.Logger.Warn("step removed from the plan while it ran; result dropped", "step", l.Step)
		return Verdict{}, nil
	}
	if spec := st.Steps[l.Step]; exit.Code == 0 && !exit.TimedOut && exit.Err == nil && spec.AwaitOutputs > 0 {
		if err := c.awaitOutputs(ctx, spec, exit.Ended.Add(time.Duration(spec.AwaitOutputs))); err != nil {
			return Verdict{}, err
		}
	}
	conds, err := c.conditions(st)
	if err != nil {
		return Verdict{}, err
	}
	return c.Conclude(st, l.Step, exit, conds.Check(l.Step)), nil
}

// awaitOutputs waits, on file events, until the step's required outputs exist or
// the deadline passes: an agent CLI may exit before its work lands.
func (c *Chain) awaitOutputs(ctx context.Context, spec *planspec.StepSpec, deadline time.Time) error {
	if len(MissingOutputs(spec, c.Root())) == 0 {
		return nil
	}
	w, err := watcher.New(watcher.Config{Root: c.WS.Dir, Paths: spec.RequiredOutputs})
	if err != nil {
		return err
	}
	defer w.Close()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	c.Logger.Info("agent exited; waiting for its outputs", "until", deadline.Format(time.RFC3339))
	for len(MissingOutputs(spec, c.Root())) > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return nil
		case _, ok := <-w.Batches():
			if !ok {
				return nil
			}
		case <-w.Errors():
		}
	}
	return nil
}

// rereadAfterAgent reads the state file again when the agent changed it, and
// returns nil when it did not. A writer may be midway through an in-place write: a
// few bounded retries give it time to finish.
func (c *Chain) rereadAfterAgent(ctx context.Context, sf *StateFile) (*planspec.State, error) {
	var err error
	for wait := 5 * time.Millisecond; wait < 2*time.Second; wait *= 2 {
		var st *planspec.State
		var changed bool
		if st, changed, err = sf.ReadIfChanged(); err == nil || !changed {
			return st, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	return nil, fmt.Errorf("state changed while the agent ran and is not valid now; left as it is: %w", err)
}

// handOff deals with a workspace another stepseq holds: a sidecar gets a trigger
// and does the work; a running check already does it.
func (c *Chain) handOff(h *Holder) error {
	if h != nil && h.Kind == "watch" {
		if err := WriteTrigger(c.WS, Trigger{From: "check"}); err != nil {
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

// Trigger asks the sidecar to run a reconcile pass, and with Step set to re-run that
// step and the ones after it.
type Trigger struct {
	Step string `json:"step,omitempty"`
	From string `json:"from"` // check, trigger, hook
	At   string `json:"at"`
}

// WriteTrigger queues t under .stepseq/triggers/, atomically: the sidecar never
// sees half a trigger.
func WriteTrigger(ws Workspace, t Trigger) error {
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

// sleepUntil waits for t on a timer, or until ctx ends.
func sleepUntil(ctx context.Context, t time.Time, now func() time.Time) error {
	d := t.Sub(now())
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
