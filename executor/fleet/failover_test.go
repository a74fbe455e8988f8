package fleet

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWorker_KilledMidStep: a worker killed with its agent mid-step (kill -9,
// no goodbye) stops acking; once its lease has passed another worker takes
// the run, clones its branch (the steps verified so far) and resumes from the
// newest state in the bucket: the verified step is not run again, the
// interrupted one is, and no two agents ever run one step.
func TestWorker_KilledMidStep(t *testing.T) {
	twins := agentEnv(t)
	s := startServer(t)
	bare := bareRepo(t)
	c := dial(t, s.ClientURL(), 1)
	dir := t.TempDir()
	stamps := func(step string) string { return filepath.Join(dir, step+".stamps") }
	release := filepath.Join(dir, "release")
	lease := 2 * time.Second
	a := workerProcess(t, s.ClientURL(), "A", lease)
	submit(t, c, Submission{Repo: bare, Run: "kill", Plan: planOf("kill",
		"stamp:"+stamps("s1")+" write:a.txt",
		"stamp:"+stamps("s2")+" pidfile:"+filepath.Join(dir, "s2.pid")+" waitfor:"+release+" write:b.txt",
		"stamp:"+stamps("s3")+" write:c.txt")})
	agent := readPID(t, filepath.Join(dir, "s2.pid"))
	waitFor(t, 30*time.Second, "s2 running in the bucket", func() bool {
		rec := record(t, c, "kill")
		return rec.Step == "s2" && rec.Done == 1
	})
	if err := syscall.Kill(a.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(agent, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.Wait()
	waitFor(t, 10*time.Second, "the killed agent gone", func() bool { return gone(agent) })
	killed := time.Now()
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	inProcessWorker(t, s.ClientURL(), "B", lease, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec, err := WaitEnded(ctx, c, "kill")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != StatusDone || rec.Worker != "B" || rec.Attempt != 2 {
		t.Fatalf("record %s by %s, attempt %d: want done by B, attempt 2", rec.Status, rec.Worker, rec.Attempt)
	}
	if took := time.Since(killed); took < lease/2 {
		t.Errorf("the run was taken %s after its worker died, within the lease %s", took, lease)
	}
	if n := lines(stamps("s1")); n != 1 {
		t.Errorf("s1, verified before the kill, ran %d times", n)
	}
	if n := lines(stamps("s2")); n != 2 {
		t.Errorf("s2 ran %d times, want 2: the interrupted try and the resumed one", n)
	}
	if _, err := os.Stat(filepath.Join(twins, "overlaps")); err == nil {
		data, _ := os.ReadFile(filepath.Join(twins, "overlaps"))
		t.Errorf("two agents ran one step: %s", data)
	}
	log := branchLog(t, bare, RunBranch("kill"))
	for _, step := range []string{"s1", "s2", "s3"} {
		if !slices.ContainsFunc(log, func(s string) bool { return strings.Contains(s, step+" verified") }) {
			t.Errorf("no commit for %s on the branch: %q", step, log)
		}
	}
}

// TestWorker_StopHandsBack: a worker told to stop (SIGTERM) stops its agent
// and hands its run back at once: the record says queued, and an idle worker
// resumes the run without waiting for the lease to pass.
func TestWorker_StopHandsBack(t *testing.T) {
	twins := agentEnv(t)
	s := startServer(t)
	bare := bareRepo(t)
	c := dial(t, s.ClientURL(), 1)
	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	lease := time.Minute // longer than the test waits: only a hand-back is fast enough
	a := workerProcess(t, s.ClientURL(), "A", lease)
	submit(t, c, Submission{Repo: bare, Run: "back", Plan: planOf("back",
		"write:a.txt", "pidfile:"+filepath.Join(dir, "s2.pid")+" waitfor:"+release+" write:b.txt")})
	agent := readPID(t, filepath.Join(dir, "s2.pid"))
	if err := os.Remove(filepath.Join(dir, "s2.pid")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "s2 running in the bucket", func() bool { return record(t, c, "back").Step == "s2" })
	if err := a.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := a.Wait(); err != nil {
		t.Fatalf("worker A on SIGTERM: %v", err)
	}
	if !gone(agent) {
		t.Fatal("worker A ended with its agent still running")
	}
	if rec := record(t, c, "back"); rec.Status != StatusQueued || rec.Worker != "" || rec.Done != 1 {
		t.Fatalf("record %s by %q, %d done: want queued by no worker, s1 done", rec.Status, rec.Worker, rec.Done)
	}
	handed := time.Now()
	inProcessWorker(t, s.ClientURL(), "B", lease, 1)
	readPID(t, filepath.Join(dir, "s2.pid"))
	if took := time.Since(handed); took > lease/2 {
		t.Errorf("the run was resumed %s after it was handed back", took)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if rec := waitEnded(t, c, "back"); rec.Status != StatusDone || rec.Worker != "B" {
		t.Fatalf("record %s by %s, want done by B", rec.Status, rec.Worker)
	}
	if _, err := os.Stat(filepath.Join(twins, "overlaps")); err == nil {
		t.Error("two agents ran one step")
	}
}
