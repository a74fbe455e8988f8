package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/planspec"
)

// capped is a plan of steps whose budget lets tries of them run.
func capped(name string, tries int, steps ...string) []byte {
	return append(fmt.Appendf(nil, "budget: {tries: %d}\n", tries), planOf(name, steps...)...)
}

// stateOf is the state run's record holds.
func stateOf(t *testing.T, c *Conn, run string) *planspec.State {
	t.Helper()
	rec := record(t, c, run)
	st, err := planspec.ParseStateBytes(rec.State, run)
	if err != nil {
		t.Fatalf("run %s's state: %v", run, err)
	}
	return st
}

// TestBudget_Blocked: a run its budget holds ends blocked on its worker, the
// hold its reason and its spend in the record. Changes that do not read or
// name no step are refused as stepseq budget refuses them; a raise puts it back on the queue, and a worker resumes it
// to DONE. A run that is done takes no change.
func TestBudget_Blocked(t *testing.T) {
	agentEnv(t)
	s := startServer(t)
	c := dial(t, s.ClientURL(), 1)
	bare := bareRepo(t)
	inProcessWorker(t, s.ClientURL(), "w1", 3*time.Second, 1)
	submit(t, c, Submission{Repo: bare, Run: "capped", Plan: capped("capped", 1, "write:a.txt", "write:b.txt")})
	rec := waitEnded(t, c, "capped")
	if rec.Status != StatusBlocked || rec.Reason != "budget: 1 of 1 tries spent (tries)" || rec.Done != 1 {
		t.Fatalf("record %s (%q), %d done: want blocked by its budget with s1 done", rec.Status, rec.Reason, rec.Done)
	}
	if !strings.Contains(string(rec.Spend), `"tries":1`) {
		t.Errorf("the record's spend %s, want its one try", rec.Spend)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		order BudgetOrder
		is    error
		words string
	}{
		{BudgetOrder{Changes: []string{"tries+1"}}, core.ErrBudgetChange, `budget change "tries+1"`},
		{BudgetOrder{Changes: []string{"tokens=many"}}, core.ErrBudgetChange, `budget tokens "many"`},
		{BudgetOrder{Step: "nope", Changes: []string{"tries=+1"}}, core.ErrNoStep, `no step "nope" in the plan (steps: s1, s2)`},
	} {
		if _, _, err := Budget(ctx, c, "capped", tc.order, "a test"); !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.words) {
			t.Errorf("budget %v: %v, want %v saying %q", tc.order, err, tc.is, tc.words)
		}
	}
	if got := record(t, c, "capped"); got.Status != StatusBlocked || len(got.Budget) != 0 {
		t.Fatalf("refused changes changed the record: %s, %v", got.Status, got.Budget)
	}
	_, said, err := Budget(ctx, c, "capped", BudgetOrder{Changes: []string{"tries=+1"}}, "a test")
	if err != nil || !strings.Contains(said, "budget tries=+1 of run capped: now tries=2; queued again") {
		t.Fatalf("budget: %q, %v; want it queued again", said, err)
	}
	rec = waitEnded(t, c, "capped")
	if rec.Status != StatusDone || rec.Attempt != 2 || len(rec.Budget) != 0 {
		t.Fatalf("record %s (%q), attempt %d, changes kept %v: want done at attempt 2, the change made", rec.Status, rec.Reason, rec.Attempt, rec.Budget)
	}
	if st := stateOf(t, c, "capped"); st.Settings.Budget.Tries != 2 || st.Settings.Spend.Tries != 2 {
		t.Errorf("budget %s, %d tries spent: want tries=2, both spent", st.Settings.Budget, st.Settings.Spend.Tries)
	}
	runGit(t, bare, "cat-file", "-e", RunBranch("capped")+":b.txt")
	if _, _, err := Budget(ctx, c, "capped", BudgetOrder{Changes: []string{"tries=+1"}}, "a test"); !errors.Is(err, ErrRunEnded) {
		t.Errorf("budget of a done run: %v, want ErrRunEnded", err)
	}
}

// TestBudget_Queued: a run that waits on the queue keeps the changes in its
// record, checked against its plan, each on the ones before; the
// worker that takes it makes them before its first try, and the run, which
// its plan's budget would hold, ends done.
func TestBudget_Queued(t *testing.T) {
	agentEnv(t)
	s := startServer(t)
	c := dial(t, s.ClientURL(), 1)
	submit(t, c, Submission{Repo: bareRepo(t), Run: "q", Plan: capped("q", 1, "write:a.txt", "write:b.txt")})
	ctx := context.Background()
	for _, ch := range []string{"tries=+1", "usd=2"} {
		if _, said, err := Budget(ctx, c, "q", BudgetOrder{Changes: []string{ch}}, "a test"); err != nil || !strings.Contains(said, "made by the worker that takes it") {
			t.Fatalf("budget %s of a queued run: %q, %v", ch, said, err)
		}
	}
	if _, _, err := Budget(ctx, c, "q", BudgetOrder{Step: "s3", Changes: []string{"tries=+1"}}, "a test"); !errors.Is(err, core.ErrNoStep) ||
		!strings.Contains(err.Error(), "(steps: s1, s2)") {
		t.Fatalf("budget of a step the plan does not have: %v, want refused", err)
	}
	if got := record(t, c, "q"); got.Status != StatusQueued || len(got.Budget) != 2 {
		t.Fatalf("record %s with changes %v, want queued with two", got.Status, got.Budget)
	}
	inProcessWorker(t, s.ClientURL(), "w1", 3*time.Second, 1)
	rec := waitEnded(t, c, "q")
	if rec.Status != StatusDone || len(rec.Budget) != 0 {
		t.Fatalf("record %s (%q), changes kept %v: want done, the changes made", rec.Status, rec.Reason, rec.Budget)
	}
	if b := stateOf(t, c, "q").Settings.Budget; b.Tries != 2 || b.USD != 2 {
		t.Errorf("budget %s, want tries=2 and usd=2", b)
	}
}

// TestBudget_Running: a change to a running run's budget reaches its worker,
// whose engine takes it while the agent works; the run, which its plan's
// budget would hold before its last step, ends done.
func TestBudget_Running(t *testing.T) {
	agentEnv(t)
	s := startServer(t)
	c := dial(t, s.ClientURL(), 1)
	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	logs := loggedWorker(t, s.ClientURL(), "w1", 3*time.Second)
	submit(t, c, Submission{Repo: bareRepo(t), Run: "live", Plan: capped("live", 2,
		"pidfile:"+filepath.Join(dir, "pid")+" waitfor:"+release+" write:a.txt", "write:b.txt", "write:c.txt")})
	readPID(t, filepath.Join(dir, "pid"))
	ctx := context.Background()
	if _, _, err := Budget(ctx, c, "live", BudgetOrder{Step: "nope", Changes: []string{"tries=+1"}}, "a test"); !errors.Is(err, core.ErrNoStep) {
		t.Fatalf("budget of no step of a running run: %v, want refused", err)
	}
	rec, said, err := Budget(ctx, c, "live", BudgetOrder{Changes: []string{"tries=+1"}}, "a test")
	if err != nil || rec.Status != StatusRunning || !strings.Contains(said, "asked worker w1") {
		t.Fatalf("budget: %s, %q, %v; want it asked of the running run's worker", rec.Status, said, err)
	}
	// The worker gives the change to its engine, which makes it between
	// tries, before it judges the next one against the budget; the command
	// leaves the bucket once the state that holds it is there.
	waitFor(t, 10*time.Second, "the command handed to the engine", func() bool {
		return logs.says("budget tries=+1 queued for the running")
	})
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if end := waitEnded(t, c, "live"); end.Status != StatusDone {
		t.Fatalf("record %s (%q), want done within the raised budget", end.Status, end.Reason)
	}
	if st := stateOf(t, c, "live"); st.Settings.Budget.Tries != 3 || st.Settings.Spend.Tries != 3 {
		t.Errorf("budget %s, %d tries spent: want tries=3, all spent", st.Settings.Budget, st.Settings.Spend.Tries)
	}
	if got := commandsWaiting(t, c, "live"); len(got) != 0 {
		t.Errorf("commands still waiting once made: %q", got)
	}
}
