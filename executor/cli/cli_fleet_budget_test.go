package cli

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFleetCLI_Budget: a run its budget blocks on a worker shows the hold in
// runs --nats; budget --nats refuses what stepseq budget refuses, with the
// same exit codes, then raises it, and the run goes on to DONE on a worker.
// A run that is done is refused, and so are budget and approve from an
// agent's environment.
func TestFleetCLI_Budget(t *testing.T) {
	t.Setenv("STEP_AGENT_CMD", "true")
	url, bare := fleetServer(t), fleetRepo(t)
	dir := t.TempDir()
	plan := filepath.Join(dir, "capped.yaml")
	if err := os.WriteFile(plan, []byte("budget: {tries: 1}\nsteps:\n  - id: a\n    title: a\n    instruction: go\n  - id: b\n    title: b\n    instruction: go\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"worker", "--nats", url, "--workdir", filepath.Join(dir, "runs"), "--lease", "5s",
			"--name", "w1", "--log-level", "error"}, io.Discard, io.Discard)
	}()
	if code, out, errs := stepseq("submit", "--nats", url, plan, "--repo", bare, "--run", "capped"); code != 0 {
		t.Fatalf("submit: exit %d\n%s%s", code, out, errs)
	}
	waitFor(t, "the run held by its budget", func() bool {
		_, out, _ := stepseq("runs", "--nats", url, "--status", "blocked")
		return regexpLine(out, `capped\s+capped\s+blocked: budget: 1 of 1 tries spent \(tries\)\s+w1\s`)
	})
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no run", []string{"tries=+1"}, 2, "budget --nats: name the run with --run"},
		{"a dir", []string{"--run", "capped", "tries=+1", dir}, 2, "a fleet's run is named by --run, never a DIR"},
		{"does not read", []string{"--run", "capped", "dollars=+2"}, 2, `bad budget change: unknown budget key "dollars"`},
		{"no step", []string{"--run", "capped", "--step", "nope", "tries=+1"}, 1, `run capped: no step "nope" in the plan (steps: a, b)`},
		{"no such run", []string{"--run", "nope", "tries=+1"}, 1, `no such run "nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := stepseq(append([]string{"budget", "--nats", url}, tc.args...)...)
			if code != tc.code || !strings.Contains(out+errs, tc.want) {
				t.Fatalf("exit %d, want %d saying %q\n%s%s", code, tc.code, tc.want, out, errs)
			}
		})
	}
	code, out, errs := stepseq("budget", "--nats", url, "--run", "capped", "tries=+1")
	if code != 0 || !strings.Contains(out, "budget tries=+1 of run capped: now tries=2; queued again: a worker resumes it from its newest state") {
		t.Fatalf("budget --nats: exit %d\n%s%s", code, out, errs)
	}
	waitFor(t, "the run done", func() bool {
		_, out, _ := stepseq("runs", "--nats", url, "--status", "done")
		return regexpLine(out, `capped\s+capped\s+done\s+w1\s+\S+\s+\S+\s+2/2\s+usage unknown, 2 tries`)
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("worker: %v", err)
	}
	if code, _, errs := stepseq("budget", "--nats", url, "--run", "capped", "tries=+1"); code != 1 || !strings.Contains(errs, "capped is done") {
		t.Fatalf("budget --nats of a done run: exit %d, %s", code, errs)
	}
	t.Setenv("STEPSEQ_STEP", "b")
	t.Setenv("STEPSEQ_TRY", "1")
	for _, args := range [][]string{{"budget", "tries=+1"}, {"approve"}} {
		code, _, errs := stepseq(append([]string{args[0], "--nats", url, "--run", "capped"}, args[1:]...)...)
		if code != 1 || !strings.Contains(errs, "environment of the agent of step b, try 1") {
			t.Errorf("%s --nats from an agent's environment: exit %d, %s", args[0], code, errs)
		}
	}
}
