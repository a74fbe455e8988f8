package proc

import (
	"errors"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The keeper is what outlives a stepseq that dies while its agents run, as
// containerd's shim outlives containerd. A stepseq that launches agents (a
// sidecar, a check) starts one keeper, itself re-executed, at its first launch,
// and launches every agent through it. The keeper is the child subreaper of
// what the agents start, so a process that leaves the agent's group and session
// and loses its parent is reparented to it; it writes each agent's end into
// the try's record when it reaps the agent; and it keeps a copy of the try lock
// while any process of the try lives (one it can attribute to the try by the
// try's marks, group or session, or one it cannot attribute at all, which
// keeps every try not yet judged). A stepseq started after a crash thus finds
// the lock held while anything of the try runs, and the agent's real end in
// the record once nothing does. The keeper lives in a session of its own, out
// of reach of the terminal's signals, and ends once its launcher is gone and
// nothing of its tries is left. stepseq signals the agent's group itself, to
// stop it or at its timeout; the keeper only launches, reaps and records.

// keeperEnv marks a process started as a keeper: "FD:PPID", the socket's
// descriptor and the launcher's pid.
const keeperEnv = "STEPSEQ_KEEPER"

// keeperAllowed says this process may start a keeper: its entry point runs
// KeeperMain, so that its own program, re-executed, becomes one.
var keeperAllowed atomic.Bool

// KeeperMain runs this process as a keeper when its launcher started it as
// one, and reports true with the exit code. Otherwise it returns false, and
// this process will launch its agents through a keeper of its own. The entry
// point calls it first, before it parses any argument.
func KeeperMain() (int, bool) {
	v, ok := os.LookupEnv(keeperEnv)
	_ = os.Unsetenv(keeperEnv)
	fd, ppid, _ := strings.Cut(v, ":")
	n, err := strconv.Atoi(fd)
	if !ok || err != nil || strconv.Itoa(os.Getppid()) != ppid {
		keeperAllowed.Store(true)
		return 0, false
	}
	return runKeeper(n), true
}

// keptTry is a try whose agent the keeper launched.
type keptTry struct {
	id       uint64
	pid      int      // the agent: it leads its own session and group
	pidfd    int      // readable once the agent ended; -1 once reaped, or none
	marks    []string // the try's variables, which what it starts carries
	lock     *HeldTry // the try's lock and record; nil when it has none
	exited   bool     // the agent was reaped
	judged   bool     // its launcher judged it: strays hold it no more
	stopped  bool
	timedOut bool
}

// stray is a child of the keeper that no try's marks, group or session name:
// it holds every try that was not over when it was first seen.
type stray struct {
	ticks uint64
	tries []uint64
}

type keeper struct {
	conn    *msgConn
	devnull int
	tries   []*keptTry
	strays  map[int]stray
	set     []unix.PollFd // pollSet's, reused: the loop runs at each request and end
}

func runKeeper(fd int) int {
	// Its loop holds one P in its poll (rawPoll); the other runs the
	// goroutine that hands SIGCHLD on, at once.
	runtime.GOMAXPROCS(2)
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	// Caught rather than ignored: an ignored signal would stay ignored in
	// the agents the keeper starts.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	wake, err := childEnds()
	if err != nil {
		return 1
	}
	devnull, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 1
	}
	// Its end of the socket pair is the keeper's alone: no agent inherits it,
	// and its loop reads it only once poll says it may.
	unix.CloseOnExec(fd)
	if unix.SetNonblock(fd, false) != nil {
		return 1
	}
	k := &keeper{conn: newRawMsgConn(fd), devnull: devnull, strays: map[int]stray{}}
	if k.conn.send(newMsg(msgReady, 0)) != nil {
		return 1
	}
	open := true
	busy := time.Now()
	for {
		set := k.pollSet(open, wake)
		if err := k.poll(set, busy); errors.Is(err, unix.EINTR) {
			runtime.Gosched() // the runtime may want this goroutine stopped (a GC)
			continue
		} else if err != nil {
			return 1
		}
		if anyReady(set) {
			busy = time.Now()
		}
		ended := false
		for _, p := range set {
			switch {
			case p.Revents == 0:
			case open && p.Fd == int32(fd):
				open = k.serve()
			case p.Fd == int32(wake):
				drain(wake)
				ended = true
			default:
				ended = true // an agent's pidfd: it ended
			}
		}
		if ended {
			k.reap()
		}
		if !open && len(k.tries) == 0 && !haveChildren() {
			return 0 // the launcher is gone, and nothing of its tries is left
		}
	}
}

// pollSet is what the loop waits on: the launcher's requests while it is
// there, any child's end (SIGCHLD, through wake), and each running agent's
// pidfd, which wakes this thread alone as the agent ends.
func (k *keeper) pollSet(open bool, wake int) []unix.PollFd {
	set := k.set[:0]
	if open {
		set = append(set, unix.PollFd{Fd: int32(k.conn.fd), Events: unix.POLLIN})
	}
	set = append(set, unix.PollFd{Fd: int32(wake), Events: unix.POLLIN})
	for _, t := range k.tries {
		if t.pidfd >= 0 {
			set = append(set, unix.PollFd{Fd: int32(t.pidfd), Events: unix.POLLIN})
		}
	}
	k.set = set
	return set
}

// keeperLinger is how long the keeper waits the fast way (rawPoll) after
// its last request or end: a chain's next launch or a short agent's end
// comes within it; a keeper with nothing to do for longer (idle, or its
// agents at work) sleeps as any process does.
const keeperLinger = time.Second

// poll waits for what set names: within keeperLinger of the last thing done
// in rawPoll, then as a system call the scheduler knows of, which lets every
// thread of the keeper sleep.
func (k *keeper) poll(set []unix.PollFd, busy time.Time) error {
	left := keeperLinger - time.Since(busy)
	if left <= 0 {
		_, err := unix.Poll(set, -1)
		return err
	}
	return rawPoll(set, left)
}

// rawPoll waits in ppoll(2), at most limit, without telling the scheduler it
// does: the loop's goroutine keeps its P, so no thread is woken to take the
// P over when the wait ends, and the runtime's monitor, never seeing every P
// idle, backs off rather than waking each 20 µs after each step's first
// system call. A signal (the monitor's preemption every 10 ms, SIGCHLD) ends
// the wait with EINTR.
func rawPoll(set []unix.PollFd, limit time.Duration) error {
	ts := unix.NsecToTimespec(limit.Nanoseconds())
	_, _, e := syscall.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&set[0])), uintptr(len(set)),
		uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

func anyReady(set []unix.PollFd) bool {
	for _, p := range set {
		if p.Revents != 0 {
			return true
		}
	}
	return false
}

// childEnds is a descriptor readable once a child of the keeper ended: a
// stray's end is known by SIGCHLD alone.
func childEnds() (int, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return -1, err
	}
	children := make(chan os.Signal, 1)
	signal.Notify(children, syscall.SIGCHLD)
	go func() {
		for range children {
			_, _ = unix.Write(p[1], []byte{0}) // a full pipe wakes the loop already
		}
	}()
	return p[0], nil
}

func drain(fd int) {
	var b [64]byte
	for {
		if n, err := unix.Read(fd, b[:]); n <= 0 || err != nil {
			return
		}
	}
}

// serve handles what the launcher sent, and reports whether it is still there.
func (k *keeper) serve() bool {
	err := k.conn.fill(unix.MSG_DONTWAIT)
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
		return true
	}
	for {
		kind, r, ok, perr := k.conn.pop()
		if perr != nil {
			return false
		}
		if !ok {
			return err == nil
		}
		q := request{kind: kind, id: r.uint(), r: r}
		if kind == msgLaunch {
			var terr error
			if q.fds, terr = k.conn.take(int(r.uint())); terr != nil {
				return false
			}
		}
		if r.err != nil {
			closeAll(q.fds)
			return false
		}
		k.handle(q)
	}
}

// request is a message from the launcher with the descriptors it passed.
type request struct {
	kind byte
	id   uint64
	r    *msgReader
	fds  []int
}

func (k *keeper) handle(q request) {
	switch q.kind {
	case msgLaunch:
		k.launch(q)
	case msgNote:
		if t := k.try(q.id); t != nil {
			note := q.r.uint()
			t.stopped = t.stopped || note == noteStopped
			t.timedOut = t.timedOut || note == noteTimedOut
		}
	case msgJudged:
		if t := k.try(q.id); t != nil {
			t.judged = true
			k.release()
		}
	}
}

func (k *keeper) try(id uint64) *keptTry {
	for _, t := range k.tries {
		if t.id == id {
			return t
		}
	}
	return nil
}

// launch starts an agent as Start would, with the attributes Start asks for
// (a sandboxed agent leads a session of its own, which is then the try's too),
// and records its pid in the try's record before it answers.
func (k *keeper) launch(q request) {
	r := q.r
	path, argv, env, dir := r.str(), r.strs(), r.strs(), r.str()
	attr := attrOf(r.uint())
	lock := int(r.int()) // the try lock's index among the files, -1: none
	fds := q.fds
	if r.err != nil || len(fds) < 2 || lock >= len(fds)-2 {
		closeAll(fds)
		k.answerFailed(q.id, syscall.EINVAL, "malformed launch")
		return
	}
	files := append([]uintptr{uintptr(k.devnull)}, uintptrs(fds)...)
	pidfd := -1
	attr.PidFD = &pidfd
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{Dir: dir, Env: env, Files: files,
		Sys: attr})
	var lockFD int
	for i, fd := range fds {
		if lock >= 0 && i == lock+2 && err == nil {
			lockFD = fd
			continue
		}
		unix.Close(fd)
	}
	if err != nil {
		var errno syscall.Errno
		errors.As(err, &errno)
		k.answerFailed(q.id, errno, err.Error())
		return
	}
	t := &keptTry{id: q.id, pid: pid, pidfd: pidfd, marks: tryMarks(env)}
	ticks, _ := StartTicks(pid)
	if lock >= 0 {
		t.lock = keptRecord(os.NewFile(uintptr(lockFD), "try lock"), pid, ticks, attr.Setsid)
	}
	k.tries = append(k.tries, t)
	m := newMsg(msgStarted, q.id)
	m.uint(uint64(pid))
	m.uint(ticks)
	_ = k.conn.send(m)
}

// keptRecord records the agent in its try's record: its pid, and its group and
// session (when it leads one: otherwise it shares the keeper's).
func keptRecord(f *os.File, pid int, ticks uint64, setsid bool) *HeldTry {
	h := &HeldTry{File: f}
	h.Record, h.size = recordOf(f)
	if h.Record.Began == 0 {
		// The record's first write dates it, before this one moves the date.
		if fi, err := f.Stat(); err == nil {
			h.Record.Began = fi.ModTime().UnixNano()
		}
	}
	h.Record.PID, h.Record.StartTicks, h.Record.Pgid, h.Record.Sid = pid, ticks, pid, 0
	if setsid {
		h.Record.Sid = pid
	}
	_ = h.Save()
	return h
}

func (k *keeper) answerFailed(id uint64, errno syscall.Errno, text string) {
	m := newMsg(msgFailed, id)
	m.uint(uint64(errno))
	m.str(text)
	_ = k.conn.send(m)
}

// reap collects every child that ended; an agent's end goes into its try's
// record, then to the launcher, once the tries that are over have let their
// locks go.
func (k *keeper) reap() {
	var ended []*keptTry
	var status []syscall.WaitStatus
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			break
		}
		for _, t := range k.tries {
			if t.pid == pid && !t.exited {
				t.exited = true
				if t.pidfd >= 0 {
					unix.Close(t.pidfd)
					t.pidfd = -1
				}
				t.recordExit(ws)
				ended, status = append(ended, t), append(status, ws)
			}
		}
	}
	k.release()
	for i, t := range ended {
		m := newMsg(msgExited, t.id)
		m.uint(uint64(status[i]))
		left := uint64(0)
		if k.try(t.id) != nil {
			left = 1 // something of the try still runs
		}
		m.uint(left)
		_ = k.conn.send(m)
	}
}

// recordExit writes the agent's end into the try's record.
func (t *keptTry) recordExit(ws syscall.WaitStatus) {
	h := t.lock
	if h == nil {
		return
	}
	h.Record.Exited, h.Record.Code, h.Record.Stopped, h.Record.TimedOut = true, ws.ExitStatus(), t.stopped, t.timedOut
	if ws.Signaled() {
		h.Record.Code, h.Record.Signal = -1, ws.Signal().String()
	}
	_ = h.Save()
}

// release lets go of the lock of every try whose agent was reaped and of which
// nothing runs: no child of the keeper is the try's by its marks, group or
// session, and no stray may be its, unless its launcher judged it.
func (k *keeper) release() {
	held := map[uint64]bool{}
	seen := map[int]bool{}
	if haveChildren() {
		forChildren(os.Getpid(), func(c child) {
			if c.state == "Z" || c.state == "X" {
				return
			}
			seen[c.pid] = true
			if k.attribute(c, held) {
				return
			}
			ticks, _ := StartTicks(c.pid)
			if s, ok := k.strays[c.pid]; !ok || s.ticks != ticks {
				s = stray{ticks: ticks}
				for _, t := range k.tries {
					s.tries = append(s.tries, t.id)
				}
				k.strays[c.pid] = s
			}
			for _, id := range k.strays[c.pid].tries {
				if t := k.try(id); t != nil && !t.judged {
					held[id] = true
				}
			}
		})
	}
	for pid := range k.strays {
		if !seen[pid] {
			delete(k.strays, pid)
		}
	}
	kept := k.tries[:0]
	for _, t := range k.tries {
		if !t.exited || held[t.id] {
			kept = append(kept, t)
			continue
		}
		t.lock.Release()
	}
	clear(k.tries[len(kept):])
	k.tries = kept
}

// attribute marks the tries child c is part of, and reports whether it is any's.
func (k *keeper) attribute(c child, held map[uint64]bool) bool {
	found := false
	for _, t := range k.tries {
		if t.ownsIDs() && (c.pid == t.pid || c.pgid == t.pid || c.sid == t.pid) || carries(c.pid, t.marks) {
			held[t.id], found = true, true
		}
	}
	return found
}

// ownsIDs reports whether the group and session named by the agent's pid are
// still the try's: they are, unless the agent was reaped and a new process
// took its pid (possible only once they were empty).
func (t *keptTry) ownsIDs() bool {
	if !t.exited {
		return true
	}
	c, ok := readChild(t.pid)
	return !ok || c.state == "Z" || c.state == "X"
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

func uintptrs(fds []int) []uintptr {
	out := make([]uintptr, len(fds))
	for i, fd := range fds {
		out[i] = uintptr(fd)
	}
	return out
}

// attrFlags are the attributes of attr a launch request carries: the rest are
// none that Start sets.
func attrFlags(attr *syscall.SysProcAttr) uint64 {
	var f uint64
	if attr != nil && attr.Setsid {
		f |= 1
	}
	if attr != nil && attr.Setpgid {
		f |= 2
	}
	return f
}

// attrOf is the attributes a launch request asked for.
func attrOf(f uint64) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: f&1 != 0, Setpgid: f&2 != 0}
}
