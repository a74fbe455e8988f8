package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stepseq/stepseq/executor/store"
)

// commandsWaiting are the bucket's keys of the commands waiting for run's
// worker, under the single key older versions used or the run's own.
func commandsWaiting(t testing.TB, c *Conn, run string) []string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	if _, err := c.KV.Get(ctx, "ctl."+run); err == nil {
		keys = append(keys, "ctl."+run)
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatal(err)
	}
	lister, err := c.KV.ListKeysFiltered(ctx, "ctl."+run+".>")
	if err != nil {
		t.Fatal(err)
	}
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	return keys
}

// budgetOf changes run's budget through the fleet, as stepseq budget --nats
// does, and fails the test unless it is asked of the run's worker.
func budgetOf(t *testing.T, c *Conn, run string, changes ...string) {
	t.Helper()
	_, said, err := Budget(context.Background(), c, run, BudgetOrder{Changes: changes}, "a test")
	if err != nil || !strings.Contains(said, "asked worker") {
		t.Fatalf("budget %v of run %s: %q, %v; want it asked of its worker", changes, run, said, err)
	}
}

// holdClone puts before the real git on PATH one whose first clone waits,
// once it has made held, until release exists: the time in which a worker
// holds a run, its record saying so, and does not watch its commands yet.
func holdClone(t *testing.T) (held, release string) {
	t.Helper()
	real, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	held, release = filepath.Join(dir, "held"), filepath.Join(dir, "release")
	script := fmt.Sprintf("#!/bin/sh\nif [ \"$1\" = clone ] && [ ! -e '%s' ]; then\n"+
		"  : > '%s'\n  while [ ! -e '%s' ]; do sleep 0.02; done\nfi\nexec '%s' \"$@\"\n", held, held, release, real)
	if err := os.WriteFile(filepath.Join(dir, "git"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return held, release
}

// stopped reports whether the process pid is stopped by a signal.
func stopped(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && (s[i+2] == 'T' || s[i+2] == 't')
}

// TestControl_QueuedWhileUnheld: commands given while the run's record says
// running but no worker holds it (its holder gone, the next not there yet)
// all wait, and the next holder acts on each once, in the order given: an
// older version's single command first, then a budget set and a raise on
// top of it.
func TestControl_QueuedWhileUnheld(t *testing.T) {
	agentEnv(t)
	s := startServer(t)
	c := dial(t, s.ClientURL(), 1)
	ctx := context.Background()
	submit(t, c, Submission{Repo: bareRepo(t), Run: "orphan", Plan: capped("orphan", 1, "write:a.txt", "write:b.txt")})
	// The record of a holder that died without a word, before it wrote a state.
	rec := record(t, c, "orphan")
	rec.Status, rec.Worker, rec.Attempt = StatusRunning, "gone", 1
	data, _ := json.Marshal(rec)
	if _, err := c.KV.Put(ctx, RunKey("orphan"), data); err != nil {
		t.Fatal(err)
	}
	legacy, _ := json.Marshal(Control{Budget: &BudgetOrder{Changes: []string{"usd=3"}, By: "an older stepseq"}, At: time.Now().UTC()})
	if _, err := c.KV.Put(ctx, "ctl.orphan", legacy); err != nil {
		t.Fatal(err)
	}
	budgetOf(t, c, "orphan", "tries=5")
	budgetOf(t, c, "orphan", "tries=+1")
	if got := commandsWaiting(t, c, "orphan"); len(got) != 3 {
		t.Fatalf("commands waiting %q, want the older one and the two given", got)
	}
	inProcessWorker(t, s.ClientURL(), "w1", 3*time.Second, 1)
	if end := waitEnded(t, c, "orphan"); end.Status != StatusDone || end.Worker != "w1" {
		t.Fatalf("record %s (%q) by %s, want done by w1", end.Status, end.Reason, end.Worker)
	}
	if b := stateOf(t, c, "orphan").Settings.Budget; b.Tries != 6 || b.USD != 3 {
		t.Errorf("budget %s, want tries=6 (set to 5, then raised by 1) and usd=3", b)
	}
	if got := commandsWaiting(t, c, "orphan"); len(got) != 0 {
		t.Errorf("commands still waiting once acted on: %q", got)
	}
}

// TestControl_QuickSuccession: commands given one right after another to a
// running run's worker are all acted on, once each and in order: two
// before the worker watches its commands (it clones the run's branch), two
// while its agent works.
func TestControl_QuickSuccession(t *testing.T) {
	agentEnv(t)
	s := startServer(t)
	c := dial(t, s.ClientURL(), 1)
	bare := bareRepo(t)
	held, cloned := holdClone(t)
	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	submit(t, c, Submission{Repo: bare, Run: "quick", Plan: capped("quick", 1,
		"pidfile:"+filepath.Join(dir, "pid")+" waitfor:"+release+" write:a.txt", "write:b.txt")})
	logs := loggedWorker(t, s.ClientURL(), "w1", 3*time.Second)
	waitFor(t, 30*time.Second, "the worker cloning the run", func() bool {
		_, err := os.Stat(held)
		return err == nil
	})
	if rec := record(t, c, "quick"); rec.Status != StatusRunning || rec.Worker != "w1" {
		t.Fatalf("record %s by %q while cloning, want running by w1", rec.Status, rec.Worker)
	}
	budgetOf(t, c, "quick", "tries=5")
	budgetOf(t, c, "quick", "tries=+1")
	if err := os.WriteFile(cloned, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	readPID(t, filepath.Join(dir, "pid"))
	waitFor(t, 30*time.Second, "the two commands acted on", func() bool {
		return len(commandsWaiting(t, c, "quick")) == 0
	})
	budgetOf(t, c, "quick", "tries=+2")
	budgetOf(t, c, "quick", "tries=+4")
	// Handed to the engine, they are made once the agent ends, and leave
	// the bucket once the state that holds them is there.
	waitFor(t, 30*time.Second, "the next two handed to the engine", func() bool {
		return logs.says("budget tries=+2 queued for the running") && logs.says("budget tries=+4 queued for the running")
	})
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if end := waitEnded(t, c, "quick"); end.Status != StatusDone {
		t.Fatalf("record %s (%q), want done", end.Status, end.Reason)
	}
	if b := stateOf(t, c, "quick").Settings.Budget; b.Tries != 12 {
		t.Errorf("budget %s, want tries=12 (5, +1, +2, +4)", b)
	}
	if got := commandsWaiting(t, c, "quick"); len(got) != 0 {
		t.Errorf("commands still waiting once acted on: %q", got)
	}
}

// TestControl_KilledBetweenCommands: a worker that acted on two commands
// and is killed (kill -9) before it acts on the two given after leaves
// those two to the run's next holder, which acts on each once and not on
// the first ones again.
func TestControl_KilledBetweenCommands(t *testing.T) {
	twins := agentEnv(t)
	s := startServer(t)
	c := dial(t, s.ClientURL(), 1)
	dir := t.TempDir()
	pidfile, release := filepath.Join(dir, "s2.pid"), filepath.Join(dir, "release")
	lease := 2 * time.Second
	a := workerProcess(t, s.ClientURL(), "A", lease)
	plan := fmt.Sprintf("budget: {tries: 3}\nsteps:\n"+
		"  - id: s1\n    title: step s1\n    instruction: \"write:a.txt\"\n    requiredOutputs: [a.txt]\n    approve: true\n"+
		"  - id: s2\n    title: step s2\n    instruction: \"pidfile:%s waitfor:%s write:b.txt\"\n    requiredOutputs: [b.txt]\n"+
		"  - id: s3\n    title: step s3\n    instruction: \"write:c.txt\"\n    requiredOutputs: [c.txt]\n", pidfile, release)
	submit(t, c, Submission{Repo: bareRepo(t), Run: "cut", Plan: []byte(plan)})
	waitFor(t, 30*time.Second, "s1's gate asked", func() bool { return record(t, c, "cut").Phase == "awaiting_approval" })
	// With no agent at work the engine makes a budget change at once.
	budgetOf(t, c, "cut", "tries=+1")
	waitFor(t, 30*time.Second, "the first command made, its change in the bucket's state", func() bool {
		return len(commandsWaiting(t, c, "cut")) == 0 && stateOf(t, c, "cut").Settings.Budget.Tries == 4
	})
	if _, err := Answer(context.Background(), c, "cut", GateAnswer{Approve: true}, "a test"); err != nil {
		t.Fatal(err)
	}
	agent := readPID(t, pidfile)
	if err := os.Remove(pidfile); err != nil {
		t.Fatal(err)
	}
	// Stopped, worker A acts on nothing more; killed, it never does.
	if err := syscall.Kill(a.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "worker A stopped", func() bool { return stopped(a.Process.Pid) })
	budgetOf(t, c, "cut", "tries=+2")
	budgetOf(t, c, "cut", "tries=+4")
	for _, pid := range []int{a.Process.Pid, agent} {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	_ = a.Wait()
	waitFor(t, 10*time.Second, "the killed agent gone", func() bool { return gone(agent) })
	if got := commandsWaiting(t, c, "cut"); len(got) != 2 {
		t.Fatalf("commands waiting %q, want the two given after the first ones", got)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	inProcessWorker(t, s.ClientURL(), "B", lease, 1)
	end := waitEnded(t, c, "cut")
	if end.Status != StatusDone || end.Worker != "B" {
		t.Fatalf("record %s (%q) by %s, want done by B", end.Status, end.Reason, end.Worker)
	}
	if b := stateOf(t, c, "cut").Settings.Budget; b.Tries != 10 {
		t.Errorf("budget %s, want tries=10 (3, +1 by A, +2 and +4 by B)", b)
	}
	if got := commandsWaiting(t, c, "cut"); len(got) != 0 {
		t.Errorf("commands still waiting once acted on: %q", got)
	}
	if _, err := os.Stat(filepath.Join(twins, "overlaps")); err == nil {
		t.Error("two agents ran one step")
	}
}

// TestClose_DropsWaitingCommands: closing a run removes the commands that
// wait for it, and a run name that could match another run's commands is
// refused one.
func TestClose_DropsWaitingCommands(t *testing.T) {
	agentEnv(t)
	s := startServer(t)
	c := dial(t, s.ClientURL(), 1)
	ctx := context.Background()
	submit(t, c, Submission{Repo: bareRepo(t), Run: "left", Plan: planOf("left", "write:a.txt")})
	// Handed back by a stopping worker after two commands came for it.
	for range 2 {
		if err := command(ctx, c, "left", Control{Budget: &BudgetOrder{Changes: []string{"tries=+1"}}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := commandsWaiting(t, c, "left"); len(got) != 2 {
		t.Fatalf("commands waiting %q, want two", got)
	}
	if rec, err := Close(ctx, c, "left", "a test"); err != nil || rec.Status != StatusClosed {
		t.Fatalf("close: %s, %v; want closed at once", rec.Status, err)
	}
	if got := commandsWaiting(t, c, "left"); len(got) != 0 {
		t.Errorf("commands of the closed run still waiting: %q", got)
	}
	for _, name := range []string{"a.b", "a.>", "*"} {
		if err := command(ctx, c, name, Control{Close: true}); !errors.Is(err, store.ErrRunName) {
			t.Errorf("a command for run %q: %v, want it refused as no run's name", name, err)
		}
	}
}
