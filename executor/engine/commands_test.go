package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// TestCommands_OneRefusalEachWay: the command surface refuses a retry of a
// DONE step, a step the plan does not have and a run that is closed or
// missing with one code and one message, whether the command goes through
// the sidecar's loop, the workspace's files, or applies with no stepseq
// holding the workspace. A budget change that does not read, names no step
// of the plan, or comes from a launched agent's environment is refused the
// same way.
func TestCommands_OneRefusalEachWay(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"write:a.txt"`))
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	rt := w.chain().Runtime
	pf := testRunPlan(t, w.dir, "side", "name: side\nsteps:\n  - id: x\n    title: X\n    agent: mcp\n    instruction: do it\n")
	if _, err := rt.StartRun(RunStart{Plan: pf}); err != nil {
		t.Fatal(err)
	}
	if _, err := (Commands{WS: rt.WS, RT: rt}).Close(context.Background(), "side"); err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, c Commands) {
		t.Helper()
		ctx := context.Background()
		refused := func(what string, err error, code Code, words string) {
			t.Helper()
			var r *Refusal
			if !errors.As(err, &r) || r.Code != code || !strings.Contains(err.Error(), words) {
				t.Errorf("%s: %v, want %s saying %q", what, err, code, words)
			}
		}
		_, err := c.Retry(ctx, "s1", "test")
		refused("retry of a DONE step", err, NotAllowed, "step s1 is done, not blocked or failed")
		_, err = c.Trigger(ctx, "nope", "test")
		refused("trigger of no step", err, NotFound, `no step "nope" in the plan (steps: s1)`)
		_, err = c.Retry(ctx, "nope", "test")
		refused("retry of no step", err, NotFound, `no step "nope" in the plan (steps: s1)`)
		err = c.Report(ctx, "nope", 0, planspec.WorkerReport{Status: "accepted", Summary: "s", Evidence: "e", Risk: "none", Next: "n"}, "test", 0)
		refused("report for no step", err, NotFound, `no step "nope" in the plan (steps: s1)`)
		_, err = c.Budget(ctx, "", []string{"usd+2"}, "test")
		refused("budget change that does not read", err, InvalidParams, `budget change "usd+2"`)
		_, err = c.Budget(ctx, "nope", []string{"usd=+2"}, "test")
		refused("budget of no step", err, NotFound, `no step "nope"`)
		agent := c
		agent.Env = func(k string) string { return map[string]string{"STEPSEQ_STEP": "s1", "STEPSEQ_TRY": "2"}[k] }
		_, err = agent.Budget(ctx, "", []string{"usd=+2"}, "test")
		refused("budget from an agent's environment", err, NotAllowed, "environment of the agent of step s1, try 2")
		// Closing a closed run is an answer: the run, closed.
		if info, err := c.Close(ctx, "side"); err != nil || info.Status != store.RunClosed {
			t.Errorf("close of a closed run: %+v, %v; want the closed run", info, err)
		}
		_, err = c.Close(ctx, "gone")
		refused("close of no run", err, NotFound, "no such run")
	}
	t.Run("no stepseq holds it", func(t *testing.T) { check(t, Commands{WS: rt.WS, RT: rt}) })
	t.Run("files", func(t *testing.T) { check(t, Commands{WS: rt.WS}) })
	t.Run("sidecar", func(t *testing.T) {
		sc := w.startSidecar(SidecarOptions{})
		defer sc.stop(t)
		check(t, Commands{WS: rt.WS, SC: sc.Sidecar})
	})
}
