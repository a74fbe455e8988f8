package proc

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// keeperClient is this process's end of its keeper (see keeper_linux.go).
type keeperClient struct {
	conn  *msgConn
	pid   int
	ready chan struct{} // closed once the keeper said it is one
	lost  chan struct{} // closed once the keeper has ended and been reaped

	mu      sync.Mutex
	next    uint64
	answers map[uint64]chan keeperAnswer
}

// keeperAnswer is what the keeper said of one launch.
type keeperAnswer struct {
	kind   byte
	pid    int
	ticks  uint64
	err    error
	status syscall.WaitStatus
	left   bool
}

// errKeeperLost: the keeper ended while it had tries of this process.
var errKeeperLost = errors.New("the keeper that launches agents ended")

var keepers struct {
	sync.Mutex
	c      *keeperClient
	broken bool // a keeper cannot be had here: agents are launched directly
}

// theKeeper is this process's keeper, started at its first launch, or again
// after one was lost; nil when this process launches its agents itself. A
// start refused for want of resources is an error, tried again as an agent's
// start is; any other failure makes this process launch directly, once said.
func theKeeper() (*keeperClient, error) {
	if !keeperAllowed.Load() {
		return nil, nil
	}
	keepers.Lock()
	defer keepers.Unlock()
	if keepers.broken {
		return nil, nil
	}
	if c := keepers.c; c != nil && !c.isLost() {
		return c, nil
	}
	// Should the keeper die, its children are reparented here rather than
	// to init, and their ends known.
	becomeSubreaper()
	c, err := startKeeper()
	if err != nil {
		if Shortage(err) {
			return nil, fmt.Errorf("start the keeper: %w", err)
		}
		keepers.broken = true
		slog.Warn("no keeper can be started: agents are launched directly, and what they start is found after a crash only while it keeps the try's environment, group or session", "err", err)
		return nil, nil
	}
	keepers.c = c
	return c, nil
}

func (c *keeperClient) isLost() bool {
	select {
	case <-c.lost:
		return true
	default:
		return false
	}
}

// startKeeper starts this program again as a keeper, in a session of its own,
// its descriptors only the null device and its end of the socket pair.
func startKeeper() (*keeperClient, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "keeper"), os.NewFile(uintptr(fds[1]), "keeper")
	// Started as the same program under the same name, so that an entry point
	// that dispatches on its name reaches KeeperMain.
	cmd := &exec.Cmd{Path: "/proc/self/exe", Args: []string{os.Args[0], "keeper"}, Dir: "/",
		Env:         append(os.Environ(), keeperEnv+"=3:"+strconv.Itoa(os.Getpid())),
		ExtraFiles:  []*os.File{theirs},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	err = startChild(cmd)
	theirs.Close() // the keeper's alone: its end shows as this end's EOF
	if err != nil {
		ours.Close()
		return nil, err
	}
	conn, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		forgetChild(cmd.Process.Pid)
		return nil, fmt.Errorf("keeper socket: %w", err)
	}
	c := &keeperClient{conn: newMsgConn(conn.(*net.UnixConn)), pid: cmd.Process.Pid, ready: make(chan struct{}),
		lost: make(chan struct{}), answers: map[uint64]chan keeperAnswer{}}
	go c.read(cmd)
	select {
	case <-c.ready:
		return c, nil
	case <-c.lost:
		return nil, errors.New("the keeper ended before it was ready: this program does not run KeeperMain first")
	case <-time.After(keeperStartLimit):
		_ = cmd.Process.Kill()
		<-c.lost
		return nil, fmt.Errorf("the keeper was not ready within %s", keeperStartLimit)
	}
}

// keeperStartLimit bounds the wait for a keeper to start: a program's start,
// on a machine under load.
const keeperStartLimit = 30 * time.Second

// read hands each answer to its launch until the keeper is gone; it then
// reaps the keeper, whose children have been reparented to this process.
func (c *keeperClient) read(cmd *exec.Cmd) {
	for {
		kind, r, err := c.conn.next()
		if err != nil {
			break
		}
		id := r.uint()
		a := keeperAnswer{kind: kind}
		switch kind {
		case msgReady:
			select {
			case <-c.ready:
			default:
				close(c.ready)
			}
			continue
		case msgStarted:
			a.pid, a.ticks = int(r.uint()), r.uint()
		case msgFailed:
			errno, text := syscall.Errno(r.uint()), r.str()
			a.err = &keeperError{text: text, errno: errno}
		case msgExited:
			a.status, a.left = syscall.WaitStatus(r.uint()), r.uint() == 1
		}
		c.mu.Lock()
		ch := c.answers[id]
		if kind != msgStarted {
			delete(c.answers, id)
		}
		c.mu.Unlock()
		if ch != nil {
			ch <- a
		}
	}
	c.conn.close()
	_ = cmd.Wait()
	forgetChild(c.pid)
	close(c.lost)
}

// keeperError is a start the keeper could not make.
type keeperError struct {
	text  string
	errno syscall.Errno
}

func (e *keeperError) Error() string { return e.text }
func (e *keeperError) Unwrap() error { return e.errno }

// keptAgent is an agent the keeper launched.
type keptAgent struct {
	c       *keeperClient
	id      uint64
	answers chan keeperAnswer
	pid     int
	ticks   uint64
}

// launch asks the keeper to start path with argv, env, dir and attr (its
// Setsid and Setpgid: the sandbox's or the bare run's), files from its
// standard output on (lock: the try lock's index among them past the two
// streams, -1 for none), and returns once the agent exists.
func (c *keeperClient) launch(path string, argv, env []string, dir string, attr *syscall.SysProcAttr, lock int, files []*os.File) (*keptAgent, error) {
	if len(files) > maxKeptFiles {
		return nil, fmt.Errorf("%d files for an agent, at most %d", len(files), maxKeptFiles)
	}
	c.mu.Lock()
	c.next++
	a := &keptAgent{c: c, id: c.next, answers: make(chan keeperAnswer, 2)}
	c.answers[a.id] = a.answers
	c.mu.Unlock()
	m := newMsg(msgLaunch, a.id)
	m.uint(uint64(len(files)))
	m.str(path)
	m.strs(argv)
	m.strs(env)
	m.str(dir)
	m.uint(attrFlags(attr))
	m.int(int64(lock))
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	if err := c.conn.send(m, fds...); err != nil {
		c.forget(a.id)
		return nil, fmt.Errorf("keeper: %w", err)
	}
	select {
	case ans := <-a.answers:
		if ans.kind != msgStarted {
			return nil, ans.err
		}
		a.pid, a.ticks = ans.pid, ans.ticks
		// Should the keeper die, the agent is reparented here: a sweep of
		// this process's own children never takes it for a stray.
		registerChild(a.pid)
		return a, nil
	case <-c.lost:
		c.forget(a.id)
		return nil, fmt.Errorf("%w during the launch", errKeeperLost)
	}
}

func (c *keeperClient) forget(id uint64) {
	c.mu.Lock()
	delete(c.answers, id)
	c.mu.Unlock()
}

// note tells the keeper that stepseq stops the agent, or that it timed out.
func (a *keptAgent) note(what uint64) {
	m := newMsg(msgNote, a.id)
	m.uint(what)
	_ = a.c.conn.send(m)
}

// judged tells the keeper that stepseq has judged the try.
func (a *keptAgent) judged() { _ = a.c.conn.send(newMsg(msgJudged, a.id)) }

// ends are the channels of the agent's end as the keeper reaped it, and of
// the keeper's loss, after which end says how the agent ended.
func (a *keptAgent) ends() (<-chan keeperAnswer, <-chan struct{}) { return a.answers, a.c.lost }

// end waits for the agent's end as the keeper reaped it. With the keeper
// gone, the agent was reparented to this process (the subreaper of what it
// starts), which reaps it; an agent the keeper reaped and did not report has
// an end no one knows.
func (a *keptAgent) end() (ws syscall.WaitStatus, left bool, err error) {
	defer forgetChild(a.pid)
	select {
	case ans := <-a.answers:
		return ans.status, ans.left, nil
	case <-a.c.lost:
	}
	select {
	case ans := <-a.answers:
		return ans.status, ans.left, nil
	default:
	}
	for {
		_, err = syscall.Wait4(a.pid, &ws, 0, nil)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		return 0, false, fmt.Errorf("%w before it said how the agent ended: %w", errKeeperLost, err)
	}
	return ws, true, nil
}

// parent is the process the agent's orphans are reparented to: the keeper,
// or this process once the keeper is gone.
func (a *keptAgent) parent() int {
	if a.c.isLost() {
		return os.Getpid()
	}
	return a.c.pid
}

// endKept stops what the agent left that the keeper adopted: its children
// that carry the try's marks or are in its group or session. SIGTERM, SIGKILL
// after grace, then a wait for the keeper to reap them, a second at most.
func endKept(a *keptAgent, marks []string, grace time.Duration) {
	parent := a.parent()
	if parent == os.Getpid() {
		endReparented(a.pid, marks, grace) // the keeper is gone: they are this process's
		return
	}
	for round := 0; round < 8; round++ {
		// The agent was reaped: a live process with its pid is a new one,
		// and a group or session of that id is that process's.
		own, ok := readChild(a.pid)
		ids := !ok || own.state == "Z" || own.state == "X"
		var live []int
		forChildren(parent, func(c child) {
			if c.state != "Z" && c.state != "X" && (ids && (c.pgid == a.pid || c.sid == a.pid) || carries(c.pid, marks)) {
				live = append(live, c.pid)
			}
		})
		if len(live) == 0 {
			return
		}
		signalAll(live, syscall.SIGTERM)
		deadline := time.Now().Add(grace)
		for wait := time.Millisecond; time.Now().Before(deadline) && anyAlive(live); wait = min(2*wait, 50*time.Millisecond) {
			time.Sleep(wait) // not this process's children: nothing to wait on but /proc
		}
		signalAll(live, syscall.SIGKILL)
		for wait, end := time.Millisecond, time.Now().Add(time.Second); anyChildOf(parent, live) && time.Now().Before(end); wait = min(2*wait, 50*time.Millisecond) {
			time.Sleep(wait)
		}
	}
}

// anyChildOf reports whether any of pids is still a child of parent, live or
// not yet reaped.
func anyChildOf(parent int, pids []int) bool {
	for _, pid := range pids {
		if c, ok := readChild(pid); ok && c.ppid == parent {
			return true
		}
	}
	return false
}
