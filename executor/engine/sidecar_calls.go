package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/planspec"
)

// Engine calls: other goroutines (the MCP server) ask the sidecar's loop through
// one channel, and the loop runs each call between two inputs, so that the machine
// keeps one owner.

// ErrStopped is returned by an engine call once the sidecar's loop has ended.
var ErrStopped = errors.New("executor: sidecar stopped")

// ErrNoStep is matched by a command that names a step the plan does not have.
var ErrNoStep = core.ErrNoStep

// ErrNotRetryable is matched by a retry of a step that is neither blocked nor
// failed, such as a DONE step.
var ErrNotRetryable = core.ErrNotRetryable

type sidecarCalls struct {
	calls   chan func()
	stopped chan struct{}
	seq     uint64
	pullKey []byte // signs the tokens of pulled tries; a run's key derives from it
}

func (s *Sidecar) initCalls(key []byte) {
	s.calls = make(chan func())
	s.stopped = make(chan struct{})
	s.pullKey = key
}

// endCalls refuses the calls that come once the loop is over.
func (s *Sidecar) endCalls() { close(s.stopped) }

// do runs fn on the loop and waits for it.
func (s *Sidecar) do(ctx context.Context, fn func()) error {
	done := make(chan struct{})
	select {
	case s.calls <- func() { fn(); close(done) }:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.stopped:
		return ErrStopped
	}
	select {
	case <-done:
		return nil
	case <-s.stopped:
		return ErrStopped
	}
}

// report hands the loop a worker's report for step's try (0: the current try):
// nil when the machine accepts it, a *RefusedError with every reason when not.
func (s *Sidecar) report(ctx context.Context, step string, try int, rep planspec.WorkerReport, via string) error {
	var reasons []string
	accepted := false
	err := s.do(ctx, func() {
		s.seq++
		ref := "call:" + strconv.FormatUint(s.seq, 10)
		var got *core.ReportVerdict
		s.main.d.verdict = func(v core.ReportVerdict) {
			if v.Ref == ref {
				got = &v
			}
		}
		s.main.d.feed(core.ReportIn{Step: step, Try: try, Report: rep, Via: via, Ref: ref})
		s.main.d.verdict = nil
		if got == nil {
			reasons = []string{"no verdict: the report was not judged"}
			return
		}
		accepted, reasons = got.Accepted, got.Reasons
	})
	switch {
	case err != nil:
		return err
	case !accepted:
		return &RefusedError{Reasons: reasons}
	}
	return nil
}

// Snapshot returns a copy of the state the loop holds; nil when it holds none.
func (s *Sidecar) Snapshot(ctx context.Context) (*planspec.State, error) {
	var st *planspec.State
	err := s.do(ctx, func() {
		if cur := s.main.d.m.State(); cur != nil {
			st = cur.Clone()
		}
	})
	return st, err
}

// View runs fn on the loop with the state it holds (nil when none): a read
// without the copy Snapshot makes. fn must neither change st nor keep it.
func (s *Sidecar) View(ctx context.Context, fn func(st *planspec.State)) error {
	return s.do(ctx, func() { fn(s.main.d.m.State()) })
}

// Current hands the pulled try on offer to client (step_current); a claim by a
// client that live says is gone no longer holds it (see PullLauncher.Take). When
// there is none, why says what the plan does instead.
func (s *Sidecar) Current(ctx context.Context, client string, live func(string) bool) (o Offer, ok bool, why string, err error) {
	err = s.do(ctx, func() {
		if o, ok, why = s.main.d.pull.Take(client, live); ok || why != "" {
			return
		}
		why = s.idleReason()
	})
	return o, ok, why, err
}

// idleReason says why no pulled try is on offer.
func (s *Sidecar) idleReason() string {
	// The state's reasons first (core.NoOffer); past them the loop knows more
	// than the state: the local agent that runs, the decision that holds the step.
	if st := s.main.d.m.State(); st == nil || st.Status == planspec.StatusDone && !s.main.d.m.Busy() {
		why, _ := core.NoOffer(st)
		return why
	}
	if a := s.main.d.active; a != nil {
		return fmt.Sprintf("step %s try %d runs a local agent (its agent is not mcp)", a.step, a.try)
	}
	d := s.main.d.m.Decision()
	if d.Step != "" {
		return fmt.Sprintf("step %s: %s (%s)", d.Step, d.Reason, d.Action)
	}
	if d.Reason != "" {
		return d.Reason
	}
	return "nothing is due now"
}

// VerifyToken returns the step and try a step_current token names.
func (s *Sidecar) VerifyToken(token string) (string, int, error) { return s.main.d.pull.Verify(token) }

// trigger queues t on the loop after the checks every face makes
// (core.CheckTrigger); Commands.Retry and Commands.Trigger call it.
func (s *Sidecar) trigger(ctx context.Context, t core.Trigger) error {
	var err error
	if cerr := s.do(ctx, func() {
		if err = core.CheckTrigger(s.main.d.m.State(), t); err != nil {
			return
		}
		s.main.d.feed(core.TriggersIn{Triggers: []core.Trigger{t}})
	}); cerr != nil {
		return cerr
	}
	return err
}
