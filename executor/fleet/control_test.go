package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func waitEnded(t *testing.T, c *Conn, run string) Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec, err := WaitEnded(ctx, c, run)
	if err != nil {
		t.Fatalf("run %s: %v", run, err)
	}
	return rec
}

func queueEmpty(t *testing.T, c *Conn) {
	t.Helper()
	waitFor(t, 10*time.Second, "the queue empty", func() bool {
		info, err := c.Stream.Info(context.Background())
		return err == nil && info.State.Msgs == 0
	})
}

// TestClose_Running: close reaches a running run's worker, which stops the
// agent, acks the run and records it closed.
func TestClose_Running(t *testing.T) {
	agentEnv(t)
	s := startServer(t)
	c := dial(t, s.ClientURL(), 1)
	dir := t.TempDir()
	inProcessWorker(t, s.ClientURL(), "w1", 3*time.Second, 1)
	submit(t, c, Submission{Repo: bareRepo(t), Run: "long", Plan: planOf("long",
		"pidfile:"+filepath.Join(dir, "pid")+" waitfor:"+filepath.Join(dir, "never")+" write:a.txt")})
	agent := readPID(t, filepath.Join(dir, "pid"))
	rec, err := Close(context.Background(), c, "long", "a test")
	if err != nil || rec.Status != StatusRunning {
		t.Fatalf("close: %s, %v; want it asked of the running run's worker", rec.Status, err)
	}
	end := waitEnded(t, c, "long")
	if end.Status != StatusClosed || end.Reason != "closed by a test" {
		t.Fatalf("record %s (%q), want closed by a test", end.Status, end.Reason)
	}
	waitFor(t, 10*time.Second, "the agent stopped", func() bool { return gone(agent) })
	queueEmpty(t, c)
	waitFor(t, 10*time.Second, "the close command taken from the bucket", func() bool {
		return len(commandsWaiting(t, c, "long")) == 0
	})
	if _, err := Close(context.Background(), c, "long", "a test"); !errors.Is(err, ErrRunEnded) {
		t.Errorf("closing it again: %v, want ErrRunEnded", err)
	}
}

// TestClose_Queued: a queued run is closed in its record at once; the worker
// that takes its message later acks it and runs nothing.
func TestClose_Queued(t *testing.T) {
	agentEnv(t)
	s := startServer(t)
	c := dial(t, s.ClientURL(), 1)
	stamps := filepath.Join(t.TempDir(), "stamps")
	submit(t, c, Submission{Repo: bareRepo(t), Run: "q", Plan: planOf("q", "stamp:"+stamps)})
	rec, err := Close(context.Background(), c, "q", "a test")
	if err != nil || rec.Status != StatusClosed {
		t.Fatalf("close: %s, %v; want closed at once", rec.Status, err)
	}
	inProcessWorker(t, s.ClientURL(), "w1", 3*time.Second, 1)
	queueEmpty(t, c)
	if _, err := os.Stat(stamps); err == nil {
		t.Error("a closed run ran")
	}
	if got := record(t, c, "q"); got.Status != StatusClosed || got.Worker != "" {
		t.Errorf("record %s by %q, want closed by no worker", got.Status, got.Worker)
	}
}

// TestRetry_Blocked: a run blocked by a step that ran out of tries goes back
// on the queue with stepseq retry --nats; a worker resumes it from its
// newest state and gives the step a new try.
func TestRetry_Blocked(t *testing.T) {
	agentEnv(t)
	t.Setenv("STEP_MAX_RETRIES", "1")
	s := startServer(t)
	c := dial(t, s.ClientURL(), 1)
	bare := bareRepo(t)
	inProcessWorker(t, s.ClientURL(), "w1", 3*time.Second, 1)
	submit(t, c, Submission{Repo: bare, Run: "flaky", Plan: planOf("flaky", "write:a.txt", "fail:2 write:b.txt")})
	rec := waitEnded(t, c, "flaky")
	if rec.Status != StatusBlocked || !strings.Contains(rec.Reason, "s2: max retries (1) exceeded") || rec.Done != 1 {
		t.Fatalf("record %s (%q), %d done: want blocked by s2 with s1 done", rec.Status, rec.Reason, rec.Done)
	}
	if _, err := Retry(context.Background(), c, "flaky", "", "a test"); err == nil || !strings.Contains(err.Error(), "name the step") {
		t.Fatalf("retry with no step: %v, want a request to name it", err)
	}
	if _, err := Retry(context.Background(), c, "flaky", "s2", "a test"); err != nil {
		t.Fatal(err)
	}
	rec = waitEnded(t, c, "flaky")
	if rec.Status != StatusDone || rec.Attempt != 2 {
		t.Fatalf("record %s (%q), attempt %d: want done at attempt 2", rec.Status, rec.Reason, rec.Attempt)
	}
	runGit(t, bare, "cat-file", "-e", RunBranch("flaky")+":b.txt")
}

// TestLease_LostWrite: a worker whose write to the run's record finds another
// revision (another worker took the run) stops its agent at once and leaves
// the record as the other wrote it; the run is not acked, so it comes back.
func TestLease_LostWrite(t *testing.T) {
	twins := agentEnv(t)
	s := startServer(t)
	c := dial(t, s.ClientURL(), 1)
	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	lease := 3 * time.Second
	inProcessWorker(t, s.ClientURL(), "w1", lease, 1)
	submit(t, c, Submission{Repo: bareRepo(t), Run: "stolen", Plan: planOf("stolen",
		"pidfile:"+filepath.Join(dir, "pid")+" waitfor:"+release+" write:a.txt")})
	agent := readPID(t, filepath.Join(dir, "pid"))
	if err := os.Remove(filepath.Join(dir, "pid")); err != nil {
		t.Fatal(err)
	}
	rec := record(t, c, "stolen")
	rec.Worker, rec.Attempt, rec.Renewed = "thief", rec.Attempt+1, time.Time{}
	data, _ := json.Marshal(rec)
	if _, err := c.KV.Put(context.Background(), RunKey("stolen"), data); err != nil {
		t.Fatal(err)
	}
	stolen := time.Now()
	waitFor(t, lease/2, "the agent stopped at the next renewal", func() bool { return gone(agent) })
	t.Logf("the agent stopped %s after the record was taken", time.Since(stolen).Round(time.Millisecond))
	if got := record(t, c, "stolen"); got.Worker != "thief" {
		t.Fatalf("the worker wrote the record after losing it: worker %q", got.Worker)
	}
	// Unacked, the run returns once the ack wait has passed, and is resumed.
	readPID(t, filepath.Join(dir, "pid"))
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if end := waitEnded(t, c, "stolen"); end.Status != StatusDone || end.Worker != "w1" {
		t.Fatalf("record %s by %s, want done by w1", end.Status, end.Worker)
	}
	if _, err := os.Stat(filepath.Join(twins, "overlaps")); err == nil {
		t.Error("two agents ran one step")
	}
}

// TestAnswer_Running: a running run's step waits at its gate, shown in the
// record; approve through the bucket reaches the run's worker, whose engine
// opens the gate, and the run ends done. An answer to a queued run, which
// asks nothing yet, is refused.
func TestAnswer_Running(t *testing.T) {
	agentEnv(t)
	s := startServer(t)
	c := dial(t, s.ClientURL(), 1)
	plan := []byte("name: gated\nsteps:\n  - id: s1\n    title: step s1\n    instruction: \"write:a.txt\"\n    requiredOutputs: [a.txt]\n    approve: true\n")
	submit(t, c, Submission{Repo: bareRepo(t), Run: "gated", Plan: plan})
	if _, err := Answer(context.Background(), c, "gated", GateAnswer{Approve: true}, "a test"); err == nil || !strings.Contains(err.Error(), "no worker runs it") {
		t.Fatalf("answer to a queued run: %v, want refused", err)
	}
	inProcessWorker(t, s.ClientURL(), "w1", 3*time.Second, 1)
	waitFor(t, 10*time.Second, "the gate asked", func() bool {
		rec, err := Get(context.Background(), c, "gated")
		return err == nil && rec.Status == StatusRunning && rec.Phase == "awaiting_approval"
	})
	if _, err := Answer(context.Background(), c, "gated", GateAnswer{Approve: true, Note: "go"}, "a test"); err != nil {
		t.Fatal(err)
	}
	if end := waitEnded(t, c, "gated"); end.Status != StatusDone {
		t.Fatalf("record %s (%q), want done once approved", end.Status, end.Reason)
	}
}
