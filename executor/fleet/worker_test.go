package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestWorker_RunsASubmittedPlan: a run submitted is taken by an idle worker,
// run to its end, and each verified step is a commit on stepseq/RUN.
func TestWorker_RunsASubmittedPlan(t *testing.T) {
	twins := agentEnv(t)
	s := startServer(t)
	bare := bareRepo(t)
	c := dial(t, s.ClientURL(), 1)
	inProcessWorker(t, s.ClientURL(), "w1", 3*time.Second, 1)
	rec := submit(t, c, Submission{Plan: planOf("three", "write:a.txt", "write:b.txt", "write:c.txt"), Repo: bare, Run: "r1"})
	if rec.Status != StatusQueued {
		t.Fatalf("status %q, want queued", rec.Status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	end, err := WaitEnded(ctx, c, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if end.Status != StatusDone || end.Done != 3 || end.Worker != "w1" {
		t.Fatalf("record %+v, want done 3/3 by w1", end)
	}
	log := branchLog(t, bare, RunBranch("r1"))
	for _, step := range []string{"s1", "s2", "s3"} {
		if !slices.ContainsFunc(log, func(s string) bool { return strings.Contains(s, step+" verified") }) {
			t.Errorf("no commit for %s verified on the branch: %q", step, log)
		}
	}
	for _, f := range []string{"a.txt", "b.txt", "c.txt", "state.json"} {
		runGit(t, bare, "cat-file", "-e", RunBranch("r1")+":"+f)
	}
	if out := runGit(t, bare, "ls-tree", "-r", "--name-only", RunBranch("r1")); strings.Contains(out, ".stepseq/") {
		t.Errorf("the worker's own files were committed:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(twins, "overlaps")); err == nil {
		t.Error("two agents ran one step")
	}
}

// TestWorker_QuickSteps: steps that end as soon as they start are each a
// commit of their own, while the pushes of the ones before run: a push names
// the commit it read, never a HEAD that moved on under it.
func TestWorker_QuickSteps(t *testing.T) {
	agentEnv(t)
	s := startServer(t)
	bare := bareRepo(t)
	c := dial(t, s.ClientURL(), 1)
	inProcessWorker(t, s.ClientURL(), "w1", 3*time.Second, 1)
	var steps []string
	for i := range 30 {
		steps = append(steps, fmt.Sprintf("write:f%d.txt", i))
	}
	submit(t, c, Submission{Plan: planOf("quick", steps...), Repo: bare, Run: "quick"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	end, err := WaitEnded(ctx, c, "quick")
	if err != nil {
		t.Fatal(err)
	}
	if end.Status != StatusDone {
		t.Fatalf("record %s: %s", end.Status, end.Reason)
	}
	verified := 0
	for _, s := range branchLog(t, bare, RunBranch("quick")) {
		if strings.Contains(s, " verified ") {
			verified++
		}
	}
	if verified != 30 {
		t.Errorf("%d commits of a verified step, want 30", verified)
	}
}
