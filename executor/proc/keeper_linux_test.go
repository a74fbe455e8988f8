package proc

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/store"
)

// startKept starts a fake agent of try s1#1 with prompt, through this test
// binary's keeper, holding a try lock of its own.
func startKept(t *testing.T, ws store.Workspace, prompt string) (*Process, *HeldTry) {
	t.Helper()
	h, err := TakeTryLock(ws, TryRecord{Step: "s1", Try: 1, Started: "t1"}, func(TryRecord) bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Release)
	p, err := Start(Spec{Argv: []string{fakeAgentPath, prompt}, Dir: ws.Dir, Env: AgentEnv(os.Environ(), "s1", 1, ws, nil),
		TryLock: h.File, Grace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if p.kept == nil {
		t.Fatal("the agent was not launched through a keeper")
	}
	h.Started(p.PID, p.StartTicks)
	return p, h
}

// A process the agent left that nothing names (an empty environment, a
// session of its own) keeps the try's lock, as the keeper cannot tell it is
// not the try's, until stepseq has judged the try; the keeper had written the
// agent's end into the record before stepseq heard of it.
func TestKeeper_StrayHoldsTheLockUntilTheTryIsJudged(t *testing.T) {
	ws := keeperWS(t)
	p, h := startKept(t, ws, "stray:"+filepath.Join(ws.Dir, "stray.pid")+" exit:4")
	exit := <-p.Done()
	stray := waitPID(t, filepath.Join(ws.Dir, "stray.pid"))
	t.Cleanup(func() { _ = syscall.Kill(stray, syscall.SIGKILL) })
	if s := ProbeTry(ws, "s1", 1, "t1"); !s.Exited || s.Code != 4 || exit.Code != 4 {
		t.Fatalf("record %+v, exit %d: want the end, exit 4, recorded before it was told", s, exit.Code)
	}
	h.Ended(exit, false)
	if !ProbeTry(ws, "s1", 1, "t1").Alive {
		t.Fatal("the lock was let go while a process that may be the try's lived")
	}
	p.judged()
	waitFor(t, func() bool { return !ProbeTry(ws, "s1", 1, "t1").Alive })
	if !processExists(stray) {
		t.Error("the stray was stopped: nothing says it is the try's")
	}
}

// A keeper killed while its agent runs: the agent, reparented to stepseq, is
// reaped by it, and its end is still its own; the next launch has a new keeper.
func TestKeeper_LostWhileItsAgentRuns(t *testing.T) {
	ws := keeperWS(t)
	p, _ := startKept(t, ws, "pidfile:"+filepath.Join(ws.Dir, "agent.pid")+" waitfor:"+filepath.Join(ws.Dir, "release")+" exit:7")
	waitPID(t, filepath.Join(ws.Dir, "agent.pid"))
	c := p.kept.c
	if err := syscall.Kill(c.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.lost:
	case <-time.After(effectWait):
		t.Fatal("the keeper's end was not seen")
	}
	if err := os.WriteFile(filepath.Join(ws.Dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if exit := <-p.Done(); exit.Code != 7 || exit.Err != nil {
		t.Errorf("exit %d (%v), want 7", exit.Code, exit.Err)
	}
	q, err := Start(Spec{Argv: []string{fakeAgentPath, "exit:0"}, Dir: ws.Dir})
	if err != nil {
		t.Fatal(err)
	}
	if <-q.Done(); q.kept == nil || q.kept.c == c {
		t.Error("the next launch has no keeper of its own")
	}
}

// keeperWS is a workspace of its own for one test.
func keeperWS(t *testing.T) store.Workspace {
	dir := t.TempDir()
	return store.Workspace{Dir: dir, State: filepath.Join(dir, "state.json")}
}
