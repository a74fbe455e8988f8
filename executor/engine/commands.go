package engine

import (
	"context"
	"errors"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// Commands is the command surface: the command line, MCP and the page each
// call these methods, and each method makes every check its command needs,
// whichever stepseq holds the workspace, and refuses with a *Refusal.
type Commands struct {
	// WS is the run's workspace (ForRun for a named run).
	WS store.Workspace
	// RT, when set, applies a retry or trigger to the state at once when no
	// stepseq holds the workspace, and bounds a close's stop with its Grace.
	RT *Runtime
	// SC is the sidecar this process runs, whose loop takes the command;
	// nil: the workspace's files carry it to whichever stepseq holds it.
	SC *Sidecar
	// Grace is how long a close waits after SIGTERM before SIGKILL; 0: RT's.
	Grace time.Duration
	// Env is the environment of the process that gives the command when it
	// is this one's (the command line, the stdio MCP server); nil when the
	// command comes from elsewhere. A budget change from the environment of
	// an agent stepseq launched is refused (ErrAgentBudget).
	Env func(string) string
	// ID, when set, is the command's own id (core.Trigger.ID): the state
	// lists it once the command is applied, and a command whose id it lists
	// is not applied again. A face that may give one command twice (a
	// fleet's next holder) sets it.
	ID string
}

// Retry asks for a new try of a blocked or failed step. It says what comes
// of it; a step the plan does not have, or one neither blocked nor failed,
// is refused.
func (c Commands) Retry(ctx context.Context, step, from string) (string, error) {
	return c.queue(ctx, core.Trigger{Step: step, From: from, Retry: true})
}

// Trigger asks for a step and the ones after it to run again. It says what
// comes of it; a step the plan does not have is refused.
func (c Commands) Trigger(ctx context.Context, step, from string) (string, error) {
	return c.queue(ctx, core.Trigger{Step: step, From: from})
}

// Report hands a worker's report for step's try (0: the current one) to the
// stepseq running it, and waits up to wait for the verdict: nil when it is
// accepted; a refused one is a *Refusal wrapping a *RefusedError.
func (c Commands) Report(ctx context.Context, step string, try int, rep planspec.WorkerReport, via string, wait time.Duration) error {
	var err error
	if c.SC != nil {
		err = c.SC.report(ctx, step, try, rep, via)
	} else {
		err = submitReport(ctx, c.WS, step, try, rep, wait)
	}
	var refused *RefusedError
	if errors.As(err, &refused) {
		refused.Problems = len(rep.Problems()) > 0
	}
	return refusal(err)
}

// Close closes run name of the workspace (CloseRun): a run that does not
// exist or is closed already is refused.
func (c Commands) Close(_ context.Context, name string) (store.RunInfo, error) {
	grace := c.Grace
	if grace == 0 && c.RT != nil {
		grace = c.RT.Grace
	}
	info, err := closeRunFiles(store.Workspace{Dir: c.WS.Dir}, name, grace)
	return info, refusal(err)
}

func (c Commands) queue(ctx context.Context, t core.Trigger) (string, error) {
	t.ID = c.ID
	switch {
	case c.SC != nil:
		return "queued " + t.Step, refusalForRun(c.SC.trigger(ctx, t), c.WS.Run)
	case c.RT != nil:
		msg, err := queue(c.RT, t)
		return msg, refusalForRun(err, c.WS.Run)
	}
	return "queued " + t.Step, refusalForRun(enqueue(c.WS, t), c.WS.Run)
}

// refusal is err as a *Refusal; nil stays nil.
func refusal(err error) error {
	if r := RefusalOf(err); r != nil {
		return r
	}
	return nil
}
