package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/store"
	"golang.org/x/sys/unix"
)

// A step's try lock is the record of its live agent that outlives stepseq. Before
// an agent starts, the driver takes flock(2) on a try lock, one of a small pool
// of files under .stepseq/agents/, and writes which step and try it is for; the
// agent inherits the locked descriptor (as fd 3), and so do its children. The
// kernel keeps the lock while any of them holds the descriptor, whatever happens
// to the stepseq that took it, so a later stepseq — after one crash or ten,
// `check` or `watch` — finds the agent by the record naming its step, tests the
// lock, and waits for it by taking it. A file is never renamed or removed: its
// inode is the lock. Whatever reaps the agent writes its exit into the record —
// the keeper that launched it (keeper_linux.go), else the driver — so a stepseq
// killed before it recorded the verdict, or before the agent ended, leaves the
// exit for the next one to judge.
//
// The files are reused: a try takes the first one that no agent holds and whose
// record no step still needs (a try that state.json has IN_PROGRESS, not yet
// judged), and the pool grows only when every file is held or needed, that is
// to the number of agents alive at once plus the tries left to judge: creating a
// file is journal work for the file system, reopening one is not.
//
// The keeper is one process per launching stepseq, not one per try: an exec of
// stepseq would cost each step of a chain more than the rest of its launch.
// The lock costs an open, a flock and three small writes.

// TryRecord is what a try lock says of its try. Started binds it to one try: the
// try's agent.startedIso in state.json, unique across plans that reuse a step id.
type TryRecord struct {
	Step    string `json:"step"`
	Try     int    `json:"try"`
	Started string `json:"started"`
	// Began is when the record was made (the file's first modification time, on
	// the clock that dates the agent's outputs), in ns since the epoch. Zero in
	// the first write, whose own modification time says it.
	Began      int64  `json:"began,omitempty"`
	PID        int    `json:"pid,omitempty"`
	StartTicks uint64 `json:"startTicks,omitempty"`
	// Pgid is the agent's process group (it leads its own); Sid its session
	// when it leads one of its own, 0 when it shares stepseq's. A process in
	// either is the try's, however it treats its environment.
	Pgid int `json:"pgid,omitempty"`
	Sid  int `json:"sid,omitempty"`
	// Exited: the agent was reaped, with Code (or Signal) as its end.
	Exited   bool   `json:"exited,omitempty"`
	Code     int    `json:"code"`
	Signal   string `json:"signal,omitempty"`
	TimedOut bool   `json:"timedOut,omitempty"`
	// Stopped: stepseq stopped the agent (shutdown, a retry): its end is no verdict.
	Stopped bool `json:"stopped,omitempty"`
}

// TryRecordSize pads the record so that each update is one pwrite over the last.
const TryRecordSize = 512

// ErrAgentAlive is returned when a step's try lock is held: an agent of that
// step still runs, and no second one may start.
var ErrAgentAlive = errors.New("an agent of this step is still running")

// TryLockTake bounds the wait for a try lock held for a moment by a reader
// (status takes a shared lock to look): a live agent holds it far longer.
var TryLockTake = 200 * time.Millisecond

// HeldTry is a try lock this process took.
type HeldTry struct {
	File   *os.File
	Record TryRecord
	size   int64 // the file's length: a record shorter than the last is cut to its own
}

// TakeTryLock takes a try lock for the try about to start and records it in it.
// needed says whether a record's try must be kept (state.json has it in
// progress, its end not judged yet): such a file is not reused. A lock whose
// record names the same step and is held means an agent of that step still
// runs: ErrAgentAlive, once a reader's brief hold would have ended.
func TakeTryLock(ws store.Workspace, rec TryRecord, needed func(TryRecord) bool) (*HeldTry, error) {
	deadline := time.Now().Add(TryLockTake)
	for pause := time.Millisecond; ; pause = min(2*pause, 20*time.Millisecond) {
		h, busy, err := takeFreeTryLock(ws, rec, needed)
		if err != nil || busy == "" {
			return h, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s: %w", busy, ErrAgentAlive)
		}
		time.Sleep(pause)
	}
}

// takeFreeTryLock is one pass over the pool. It returns the lock it took and
// recorded, or busy: the path of a held lock that names rec's step, or of the
// new file that a reader held as it was made.
func takeFreeTryLock(ws store.Workspace, rec TryRecord, needed func(TryRecord) bool) (h *HeldTry, busy string, err error) {
	var free *os.File // the file taken for the try
	var freeSize int64
	keep := func(f *os.File, size int64) {
		if free != nil {
			free.Close()
		}
		free, freeSize = f, size
	}
	defer func() {
		if h == nil && free != nil {
			free.Close()
		}
	}()
	n := 0
	for ; ; n++ {
		path := ws.TryLockPath(n)
		f, err := openTryLock(path, unix.O_RDWR, 0)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return nil, "", fmt.Errorf("try lock %s: %w", path, err)
		}
		r, size := recordOf(f)
		own := r.Step == rec.Step
		// A file is tested when it may be taken, or when its record names this
		// step: an agent of the step may hold it. Its record (the one a step may
		// have in the pool) is overwritten by the new try in preference to any
		// other file's, so that a step's record is found once.
		if !own && (free != nil || needed(r)) {
			f.Close()
			continue
		}
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			if own {
				return nil, path, nil
			}
			continue
		}
		if err != nil {
			f.Close()
			return nil, "", fmt.Errorf("try lock %s: %w", path, err)
		}
		if own || free == nil {
			keep(f, size)
			continue
		}
		f.Close() // releases the lock
	}
	if free == nil {
		f, busy, err := newTryLock(ws.TryLockPath(n))
		if f == nil {
			return nil, busy, err
		}
		keep(f, 0)
	}
	h = &HeldTry{File: free, Record: rec, size: freeSize}
	if err := h.Save(); err != nil {
		return nil, "", fmt.Errorf("try lock %s: %w", free.Name(), err)
	}
	if fi, err := free.Stat(); err == nil {
		h.Record.Began = fi.ModTime().UnixNano()
	}
	return h, "", nil
}

// newTryLock adds a file to the pool at path, locked; busy is path when another
// stepseq locked it first (f nil, no error).
func newTryLock(path string) (f *os.File, busy string, err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, "", fmt.Errorf("try lock: %w", err)
	}
	f, err = openTryLock(path, unix.O_RDWR|unix.O_CREAT, 0o644)
	if err != nil {
		return nil, "", fmt.Errorf("try lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, path, nil
		}
		return nil, "", fmt.Errorf("try lock %s: %w", path, err)
	}
	return f, "", nil
}

// openTryLock opens a file of the pool, close-on-exec. It is opened with
// open(2) and handed to os.NewFile rather than by os.OpenFile, which offers a
// regular file to Go's poller (three fcntl and an epoll_ctl that refuses it,
// each time): a try lock is only ever read, written and locked blocking.
func openTryLock(path string, flags int, perm uint32) (*os.File, error) {
	var fd int
	err := ignoringEINTR(func() (err error) {
		fd, err = unix.Open(path, flags|unix.O_CLOEXEC, perm)
		return err
	})
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// ignoringEINTR calls f again while it fails with EINTR, as os does: a
// signal that interrupts open(2) on a slow file system is no failure.
func ignoringEINTR(f func() error) error {
	for {
		if err := f(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// recordOf reads the record an open try lock holds, and the file's size. A
// file with no record (new, or torn by a full disk) names no step.
func recordOf(f *os.File) (TryRecord, int64) {
	var rec TryRecord
	fi, err := f.Stat()
	if err != nil {
		return rec, 0
	}
	data, err := io.ReadAll(io.NewSectionReader(f, 0, min(fi.Size(), store.RecordCap.Bytes)))
	if err == nil {
		rec = parseRecord(bytes.TrimSpace(data))
	}
	return rec, fi.Size()
}

func (h *HeldTry) Save() error {
	data := h.Record.appendJSON(make([]byte, 0, TryRecordSize))
	for len(data) < TryRecordSize-1 {
		data = append(data, ' ')
	}
	data = append(data, '\n')
	_, err := h.File.WriteAt(data, 0)
	if err == nil && int64(len(data)) < h.size {
		err = h.File.Truncate(int64(len(data)))
	}
	if err == nil {
		h.size = int64(len(data))
	}
	return err
}

// Started records the agent's pid, group and session, for a later stepseq to
// wait on it and on what it started even if they closed the inherited
// descriptor. A keeper that launched the agent has recorded them already, and
// perhaps its end too: the record on disk is then left as it is.
func (h *HeldTry) Started(pid int, ticks uint64) {
	if h == nil || h.File == nil {
		return
	}
	if disk, _ := recordOf(h.File); disk.PID == pid && disk.Step == h.Record.Step && disk.Try == h.Record.Try {
		h.Record.PID, h.Record.StartTicks, h.Record.Pgid, h.Record.Sid = disk.PID, disk.StartTicks, disk.Pgid, disk.Sid
		return
	}
	h.Record.PID, h.Record.StartTicks, h.Record.Pgid, h.Record.Sid = pid, ticks, pid, ownSession(pid)
	_ = h.Save()
}

// ownSession is pid when the process leads a session of its own, else 0: a
// session it shares with stepseq is not the try's.
func ownSession(pid int) int {
	if sid, err := unix.Getsid(pid); err == nil && sid == pid {
		return pid
	}
	return 0
}

// group is the agent's process group: it leads its own (an older record names
// only the pid).
func (rec TryRecord) group() int {
	if rec.Pgid > 0 {
		return rec.Pgid
	}
	return rec.PID
}

// groupsOwned reports whether the record's group and session are still the
// try's. A group's id stays taken while any member lives, so once the agent
// is gone its group is the try's until the last member ends; only when a new
// process holds the agent's pid (it started at another time) may a group or a
// session of that id be a stranger's.
func groupsOwned(rec TryRecord) bool {
	if rec.PID <= 0 {
		return false
	}
	ticks, err := StartTicks(rec.PID)
	return err != nil || ticks == rec.StartTicks
}

// Ended records how the agent ended and releases the lock: nothing of the try
// runs any more (its group was swept before its Exit came).
func (h *HeldTry) Ended(exit core.Exit, stopped bool) {
	if h == nil || h.File == nil {
		return
	}
	h.Record.Exited, h.Record.Code, h.Record.TimedOut, h.Record.Stopped = true, exit.Code, exit.TimedOut, stopped
	if exit.Signal != nil {
		h.Record.Signal = exit.Signal.String()
	}
	if exit.Err != nil {
		h.Record.Stopped = true // it never ran, or waiting failed: no verdict of its own
	}
	_ = h.Save()
	h.Release()
}

// Release gives the lock up without recording an end: the agent never started.
func (h *HeldTry) Release() {
	if h == nil || h.File == nil {
		return
	}
	h.File.Close()
	h.File = nil
}

// ProbeTry finds step id's try lock, tests it without keeping it, and reads its
// record for the try that started at started (agent.startedIso). It takes a
// shared lock, which a live agent's exclusive one refuses. Alive is any agent of
// the step, whichever try it is.
func ProbeTry(ws store.Workspace, id string, try int, started string) core.TryState {
	var s core.TryState
	for n := 0; ; n++ {
		f, err := openTryLock(ws.TryLockPath(n), unix.O_RDONLY, 0)
		if err != nil {
			return s // the pool ends at the first file missing
		}
		rec, _ := recordOf(f)
		if rec.Step != id {
			f.Close()
			continue
		}
		held := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
		alive := errors.Is(held, unix.EWOULDBLOCK)
		if held == nil {
			_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		}
		s.Alive = s.Alive || alive
		if rec.Try == try && rec.Started == started {
			s.Recorded, s.PID = true, rec.PID
			s.Exited, s.Code, s.Signal, s.TimedOut, s.Stopped = rec.Exited, rec.Code, rec.Signal, rec.TimedOut, rec.Stopped
			if rec.Began != 0 {
				s.Began = time.Unix(0, rec.Began)
			} else if fi, err := f.Stat(); err == nil {
				s.Began = fi.ModTime()
			}
			if !alive && !rec.Exited && rec.PID > 0 {
				s.Alive = s.Alive || Alive(rec.PID, rec.StartTicks)
			}
			if !s.Alive {
				// Nothing holds the lock: what the agent started may still
				// run, having closed the descriptor it inherited.
				s.Alive = tryRunning(rec, tryMarksOf(ws, id, try))
			}
		}
		f.Close()
	}
}

// TryLockOf is the try lock whose record names step id, "" when none does.
func TryLockOf(ws store.Workspace, id string) string {
	for n := 0; ; n++ {
		path := ws.TryLockPath(n)
		f, err := openTryLock(path, unix.O_RDONLY, 0)
		if err != nil {
			return ""
		}
		rec, _ := recordOf(f)
		f.Close()
		if rec.Step == id {
			return path
		}
	}
}

// StopTry ends what the try rec started that still lives though its agent is
// gone (the worker a killed wrapper left): SIGTERM, SIGKILL after grace.
func StopTry(ws store.Workspace, rec TryRecord, grace time.Duration) {
	if rec.Step != "" {
		stopTryProcs(rec, tryMarksOf(ws, rec.Step, rec.Try), grace)
	}
}

// WaitTry blocks until the try lock at path is free, its recorded agent is
// gone, and so is every process the try started that /proc finds. The flock
// sleeps in the kernel; it cannot be cancelled, so a ctx that ends leaves it
// blocked until the agent ends or the process exits.
func WaitTry(ctx context.Context, ws store.Workspace, path string) {
	if path == "" {
		return
	}
	f, err := openTryLock(path, unix.O_RDONLY, 0)
	if err != nil {
		return
	}
	defer f.Close()
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_SH)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	rec, _ := recordOf(f)
	if !rec.Exited && rec.PID > 0 && Alive(rec.PID, rec.StartTicks) {
		// The agent closed the descriptor it inherited: wait on its pid.
		_ = WaitGone(ctx, rec.PID)
	}
	if rec.Step != "" {
		waitTryGone(ctx, rec, tryMarksOf(ws, rec.Step, rec.Try))
	}
}
