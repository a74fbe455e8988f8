package fleet

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// workerLog is a worker's log the test reads while the worker writes it.
type workerLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *workerLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *workerLog) says(text string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Contains(l.buf.String(), text)
}

// loggedWorker is inProcessWorker whose log the test also reads.
func loggedWorker(t *testing.T, url, name string, lease time.Duration) *workerLog {
	t.Helper()
	c, err := Dial(context.Background(), url, Options{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	logs := &workerLog{}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(logs, testWriter{t}), &slog.HandlerOptions{Level: slog.LevelInfo}))
	w, err := NewWorker(context.Background(), c, WorkerOptions{Workdir: t.TempDir(), MaxRuns: 1, Lease: lease, Name: name, Logger: log})
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker %s: %v", name, err)
		}
		c.Close()
	})
	return logs
}

// workerProcessLogged is workerProcess with its log in a file the test
// reads while it runs.
func workerProcessLogged(t *testing.T, url, name string, lease time.Duration) (*exec.Cmd, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(stepseqBinary(t), "worker", "--nats", url, "--workdir", t.TempDir(), "--lease", lease.String(), "--name", name)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		f.Close()
		data, _ := os.ReadFile(path)
		t.Logf("worker %s:\n%s", name, data)
	})
	return cmd, path
}

func fileSays(path, text string) bool {
	data, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(data), text)
}

// TestControl_KilledWhileHanded: a budget change given while the agent
// works is handed to the engine, which makes it only once the agent ends;
// the worker killed (kill -9, with its agent) before then leaves it to the
// run's next holder, which makes it once.
func TestControl_KilledWhileHanded(t *testing.T) {
	twins := agentEnv(t)
	s := startServer(t)
	c := dial(t, s.ClientURL(), 1)
	dir := t.TempDir()
	pidfile, release := filepath.Join(dir, "s1.pid"), filepath.Join(dir, "release")
	lease := 2 * time.Second
	a, logA := workerProcessLogged(t, s.ClientURL(), "A", lease)
	submit(t, c, Submission{Repo: bareRepo(t), Run: "handed", Plan: capped("handed", 3,
		"pidfile:"+pidfile+" waitfor:"+release+" write:a.txt", "write:b.txt")})
	agent := readPID(t, pidfile)
	budgetOf(t, c, "handed", "tries=+3")
	waitFor(t, 30*time.Second, "the change handed to A's engine", func() bool {
		return fileSays(logA, "budget tries=+3 queued for the running")
	})
	for _, pid := range []int{a.Process.Pid, agent} {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	_ = a.Wait()
	waitFor(t, 10*time.Second, "the killed agent gone", func() bool { return gone(agent) })
	if b := stateOf(t, c, "handed").Settings.Budget; b.Tries != 3 {
		t.Fatalf("budget %s in the bucket before the agent ended, want tries=3: the change is made between agents", b)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	inProcessWorker(t, s.ClientURL(), "B", lease, 1)
	end := waitEnded(t, c, "handed")
	if end.Status != StatusDone || end.Worker != "B" {
		t.Fatalf("record %s (%q) by %s, want done by B", end.Status, end.Reason, end.Worker)
	}
	if b := stateOf(t, c, "handed").Settings.Budget; b.Tries != 6 {
		t.Errorf("budget %s, want tries=6 (3, +3 once)", b)
	}
	if got := commandsWaiting(t, c, "handed"); len(got) != 0 {
		t.Errorf("commands still waiting once acted on: %q", got)
	}
	if _, err := os.Stat(filepath.Join(twins, "overlaps")); err == nil {
		t.Error("two agents ran one step")
	}
}

// TestControl_AppliedNotAgain: a command made and mirrored whose key the
// bucket holds again (its removal lost as its worker died) is removed by
// the run's next holder and not made twice.
func TestControl_AppliedNotAgain(t *testing.T) {
	agentEnv(t)
	s := startServer(t)
	c := dial(t, s.ClientURL(), 1)
	ctx := context.Background()
	lease := 2 * time.Second
	a := workerProcess(t, s.ClientURL(), "A", lease)
	plan := "budget: {tries: 3}\nsteps:\n" +
		"  - id: s1\n    title: step s1\n    instruction: \"write:a.txt\"\n    requiredOutputs: [a.txt]\n    approve: true\n"
	submit(t, c, Submission{Repo: bareRepo(t), Run: "twice", Plan: []byte(plan)})
	waitFor(t, 30*time.Second, "s1's gate asked", func() bool { return record(t, c, "twice").Phase == "awaiting_approval" })
	// With no agent at work the engine makes the change at once.
	key := controlKey("twice", commandID(time.Now()))
	data, _ := json.Marshal(Control{Budget: &BudgetOrder{Changes: []string{"tries=+1"}, By: "a test"}, At: time.Now().UTC()})
	if _, err := c.KV.Create(ctx, key, data); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the change made, its key removed", func() bool {
		return len(commandsWaiting(t, c, "twice")) == 0 && stateOf(t, c, "twice").Settings.Budget.Tries == 4
	})
	if err := syscall.Kill(a.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.Wait()
	// The removal lost: the key as it was before A removed it.
	if _, err := c.KV.Put(ctx, key, data); err != nil {
		t.Fatal(err)
	}
	inProcessWorker(t, s.ClientURL(), "B", lease, 1)
	waitFor(t, 30*time.Second, "B holding the run, the command's key removed", func() bool {
		return record(t, c, "twice").Worker == "B" && len(commandsWaiting(t, c, "twice")) == 0
	})
	if _, err := Answer(ctx, c, "twice", GateAnswer{Approve: true}, "a test"); err != nil {
		t.Fatal(err)
	}
	end := waitEnded(t, c, "twice")
	if end.Status != StatusDone || end.Worker != "B" {
		t.Fatalf("record %s (%q) by %s, want done by B", end.Status, end.Reason, end.Worker)
	}
	if b := stateOf(t, c, "twice").Settings.Budget; b.Tries != 4 {
		t.Errorf("budget %s, want tries=4 (3, +1 once)", b)
	}
	if got := commandsWaiting(t, c, "twice"); len(got) != 0 {
		t.Errorf("commands still waiting: %q", got)
	}
}
