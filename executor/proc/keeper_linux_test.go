package proc

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/store"
	"golang.org/x/sys/unix"
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

// A stray's own end lets the try's lock go, judged or not: the keeper hears
// of it by SIGCHLD while its loop waits in its poll.
func TestKeeper_StrayEndLetsTheLockGo(t *testing.T) {
	ws := keeperWS(t)
	p, h := startKept(t, ws, "stray:"+filepath.Join(ws.Dir, "stray.pid")+" exit:0")
	exit := <-p.Done()
	stray := waitPID(t, filepath.Join(ws.Dir, "stray.pid"))
	h.Ended(exit, false)
	if !ProbeTry(ws, "s1", 1, "t1").Alive {
		t.Fatal("the lock was let go while a process that may be the try's lived")
	}
	if err := syscall.Kill(stray, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return !ProbeTry(ws, "s1", 1, "t1").Alive })
	if s := ProbeTry(ws, "s1", 1, "t1"); !s.Exited || s.Code != 0 {
		t.Fatalf("record %+v: want the agent's own end, exit 0", s)
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

// The keeper starts an agent with the attributes Start gives it, no more: a
// bare agent leads its own group in the keeper's session, one asked to (as
// the sandbox asks) leads a session of its own, and only that session is
// recorded as the try's.
func TestKeeper_StartsWithTheAttributesItIsGiven(t *testing.T) {
	ws := keeperWS(t)
	p, h := startKept(t, ws, "pidfile:"+filepath.Join(ws.Dir, "bare.pid")+" waitfor:"+filepath.Join(ws.Dir, "release"))
	waitPID(t, filepath.Join(ws.Dir, "bare.pid"))
	if pgid, _ := unix.Getpgid(p.PID); pgid != p.PID {
		t.Errorf("bare agent's group %d, want its own %d", pgid, p.PID)
	}
	if sid, _ := unix.Getsid(p.PID); sid == p.PID {
		t.Error("a bare agent was made to lead a session: its sandbox-less attributes ask for a group only")
	}
	if rec, _ := recordOf(h.File); rec.Sid != 0 || rec.Pgid != p.PID {
		t.Errorf("record %+v: want the group and no session", rec)
	}

	k, err := theKeeper()
	if err != nil || k == nil {
		t.Fatalf("keeper %v, %v", k, err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	h2, err := TakeTryLock(ws, TryRecord{Step: "s2", Try: 1, Started: "t2"}, func(TryRecord) bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h2.Release)
	pidfile := filepath.Join(ws.Dir, "boxed.pid")
	a, err := k.launch(fakeAgentPath, []string{fakeAgentPath, "pidfile:" + pidfile + " waitfor:" + filepath.Join(ws.Dir, "release")},
		os.Environ(), ws.Dir, &syscall.SysProcAttr{Setsid: true}, 0, []*os.File{outW, outW, h2.File})
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	waitPID(t, pidfile)
	if sid, _ := unix.Getsid(a.pid); sid != a.pid {
		t.Errorf("agent asked to lead a session is in session %d, want %d", sid, a.pid)
	}
	if rec, _ := recordOf(h2.File); rec.Sid != a.pid {
		t.Errorf("record %+v: want its session %d", rec, a.pid)
	}
	if err := os.WriteFile(filepath.Join(ws.Dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if _, _, err := a.end(); err != nil {
		t.Fatal(err)
	}
	a.judged()
}

// A program whose start never becomes a keeper (it does not run KeeperMain
// first) leaves this process launching its agents itself.
func TestKeeper_NoneCanStartAgentsRunDirectly(t *testing.T) {
	keepers.Lock()
	was := keepers.c
	keepers.c = nil
	keepers.Unlock()
	t.Cleanup(func() {
		keepers.Lock()
		keepers.c, keepers.broken = was, false
		keepers.Unlock()
	})
	t.Setenv("STEPSEQ_TEST_NO_KEEPER", "1")
	p, err := Start(Spec{Argv: []string{fakeAgentPath, "exit:5"}})
	if err != nil {
		t.Fatal(err)
	}
	if exit := <-p.Done(); p.kept != nil || exit.Code != 5 {
		t.Errorf("kept %v, exit %d: want a direct launch, exit 5", p.kept != nil, exit.Code)
	}
}
