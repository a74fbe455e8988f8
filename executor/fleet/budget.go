package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/planspec"
)

// Budget changes what run may spend, as stepseq budget does, checked first
// against the state the run goes on from as the engine checks it. A running
// run's worker gives the change to its engine. A run no worker holds keeps
// it in its record, for the engine of the worker that takes it next to make
// before anything launches; a run its budget blocked goes back on the queue
// once no bound holds it. It says what comes of it.
func Budget(ctx context.Context, c *Conn, run string, o BudgetOrder, by string) (Record, string, error) {
	cs, err := planspec.ParseBudgetChanges(o.Changes)
	if err != nil {
		return Record{}, "", fmt.Errorf("%w: %w", core.ErrBudgetChange, err)
	}
	o.By = by
	for range 5 {
		rec, rev, err := get(ctx, c, run)
		if err != nil {
			return Record{}, "", err
		}
		switch rec.Status {
		case StatusDone, StatusClosed:
			return rec, "", fmt.Errorf("%w: %s is %s", ErrRunEnded, run, rec.Status)
		case StatusRunning:
			msg, err := budgetRunning(ctx, c, rec, o, cs)
			return rec, msg, err
		}
		now := time.Now()
		msg, requeue, err := keepBudget(&rec, o, now)
		if err != nil {
			return rec, "", err
		}
		rec.Updated = now.UTC()
		newRev, lost, err := putRecord(ctx, c, run, rec, rev, "change the budget of run "+run)
		if lost {
			continue // a worker took it meanwhile
		} else if err != nil {
			return Record{}, "", err
		}
		if requeue {
			if err := requeueAfterBudget(ctx, c, rec, newRev); err != nil {
				return rec, "", err
			}
		}
		return rec, msg, nil
	}
	return Record{}, "", keptChanging("change the budget of run", run)
}

// budgetRunning leaves the change for the worker that holds rec's run, once
// it passes the checks against the state the worker last wrote.
func budgetRunning(ctx context.Context, c *Conn, rec Record, o BudgetOrder, cs []planspec.BudgetChange) (string, error) {
	if len(rec.State) > 0 {
		st, err := planspec.ParseStateBytes(rec.State, "run "+rec.Run+"'s state")
		if err != nil {
			return "", err
		}
		if _, err := makeOrder(st, o, time.Now()); err != nil {
			return "", fmt.Errorf("run %s: %w", rec.Run, err)
		}
	}
	if err := command(ctx, c, rec.Run, Control{Budget: &o, By: o.By}); err != nil {
		return "", err
	}
	return fmt.Sprintf("asked worker %s to change the budget of run %s: %s (its engine makes it as stepseq budget does)",
		rec.Worker, rec.Run, planspec.ChangesText(cs)), nil
}

// keepBudget adds o to the changes rec keeps for its next holder, after
// making them all on the state that holder goes on from: the checks the
// engine makes, and what the budget becomes. requeue says that rec, blocked
// by its budget alone, is queued again: no bound holds it once they are made.
func keepBudget(rec *Record, o BudgetOrder, now time.Time) (msg string, requeue bool, err error) {
	cs, _ := planspec.ParseBudgetChanges(o.Changes)
	what := fmt.Sprintf("budget %s of run %s", planspec.ChangesText(cs), rec.Run)
	if len(rec.State) == 0 && rec.Attempt > 0 {
		// A worker took it, yet its record holds no state: the state was too
		// big for the bucket (the branch holds it), or the run ended before
		// it had one. The engine of the next worker checks the change.
		rec.Budget = append(rec.Budget, o)
		if rec.Status == StatusQueued {
			return what + ": kept for the worker that takes it, which makes it before anything launches", false, nil
		}
		return fmt.Sprintf("%s: kept for its next worker; it stays %s (%s): stepseq retry --nats URL --run %s queues it again", what, rec.Status, rec.Reason, rec.Run), false, nil
	}
	st, err := startState(*rec)
	if err != nil {
		return "", false, err
	}
	for _, earlier := range rec.Budget {
		_, _ = makeOrder(st, earlier, now) // checked when it was given
	}
	step := currentStep(st)
	_, wasHeld := core.BudgetReached(st, step, now)
	b, err := makeOrder(st, o, now)
	if err != nil {
		return "", false, fmt.Errorf("run %s: %w", rec.Run, err)
	}
	rec.Budget = append(rec.Budget, o)
	what += ": now " + b.String()
	bound, held := core.BudgetReached(st, step, now)
	switch {
	case rec.Status == StatusQueued:
		return what + ", made by the worker that takes it from the queue before anything launches", false, nil
	case !wasHeld || len(st.Blockers) > 0:
		retry := "stepseq retry --nats URL --run " + rec.Run
		if len(st.Blockers) > 0 {
			retry += " STEP"
		}
		return fmt.Sprintf("%s; it stays %s (%s): %s gives it a new try", what, rec.Status, rec.Reason, retry), false, nil
	case held:
		rec.Reason = bound.Text()
		return fmt.Sprintf("%s; still held, %s: raise it more (stepseq budget --nats URL --run %s)", what, bound.Text(), rec.Run), false, nil
	case rec.Job == nil:
		return what + "; its record holds no plan to queue again (made by hand?): submit it again", false, nil
	}
	rec.Status, rec.Reason, rec.Worker = StatusQueued, "", ""
	return what + "; queued again: a worker resumes it from its newest state", true, nil
}

// requeueAfterBudget puts rec's run, whose record says queued at revision
// rev, back on the queue; when that fails, the record says blocked again.
func requeueAfterBudget(ctx context.Context, c *Conn, rec Record, rev uint64) error {
	job := *rec.Job
	job.Retry = ""
	err := publish(ctx, c, job)
	if err == nil {
		return nil
	}
	rec.Status, rec.Reason = StatusBlocked, "not queued: "+err.Error()
	data, _ := json.Marshal(rec)
	if _, uerr := c.KV.Update(ctx, RunKey(rec.Run), data, rev); uerr != nil {
		return fmt.Errorf("queue run %s again: %w; its budget is changed and its record says queued with no message: stepseq close --nats URL %s, and submit it again", rec.Run, err, rec.Run)
	}
	return fmt.Errorf("queue run %s again: %w (its budget is changed and its record says blocked: stepseq retry --nats URL --run %s queues it again)", rec.Run, err, rec.Run)
}

// makeOrder makes o on st as the engine makes a budget change: with no step,
// on the bound that holds the run. It returns the budget it leaves.
func makeOrder(st *planspec.State, o BudgetOrder, now time.Time) (planspec.Budget, error) {
	cs, err := planspec.ParseBudgetChanges(o.Changes)
	if err != nil {
		return planspec.Budget{}, fmt.Errorf("%w: %w", core.ErrBudgetChange, err)
	}
	step := o.Step
	if step == "" {
		step = core.BudgetTarget(st, now)
	}
	return core.ApplyBudget(st, step, cs)
}

// currentStep is the step at st's cursor; "" once every step is past.
func currentStep(st *planspec.State) string {
	if st.CurrentStep >= 0 && st.CurrentStep < len(st.StepQueue) {
		return st.StepQueue[st.CurrentStep]
	}
	return ""
}
