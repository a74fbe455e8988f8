package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"golang.org/x/sys/unix"
)

// A step's try lock is the record of its live agent that outlives stepseq. Before
// an agent starts, the driver takes flock(2) on .stepseq/agents/<step>.lock and
// writes which try it is; the agent inherits the locked descriptor (as fd 3), and
// so do its children. The kernel keeps the lock while any of them holds the
// descriptor, whatever happens to the stepseq that took it, so a later stepseq —
// after one crash or ten, `check` or `watch` — finds the agent by testing the
// lock, and waits for it by taking it. The file is never renamed or removed: its
// inode is the lock. The driver that reaps the agent writes its exit into the
// record, so a stepseq killed before it recorded the verdict leaves the exit for
// the next one to judge.
//
// A per-try supervisor process (a shim that forks the agent and outlives
// stepseq) would know the exit of an agent whose stepseq died, but it costs an
// exec of stepseq per try: about 4 ms, half of a step of the chain today. The
// lock costs an open, a flock and two small writes.

// TryLockPath is the lock of step id's live agent.
// Each run has its own: a step id names a step of one run.
func (w Workspace) TryLockPath(id string) string {
	return w.runMeta("agents", safeName(id)+".lock")
}

// tryRecord is what a try lock says of its try. Started binds it to one try: the
// try's agent.startedIso in state.json, unique across plans that reuse a step id.
type tryRecord struct {
	Step    string `json:"step"`
	Try     int    `json:"try"`
	Started string `json:"started"`
	// Began is when the record was made (the file's first modification time, on
	// the clock that dates the agent's outputs), in ns since the epoch. Zero in
	// the first write, whose own modification time says it.
	Began      int64  `json:"began,omitempty"`
	PID        int    `json:"pid,omitempty"`
	StartTicks uint64 `json:"startTicks,omitempty"`
	// Exited: the agent was reaped, with Code (or Signal) as its end.
	Exited   bool   `json:"exited,omitempty"`
	Code     int    `json:"code"`
	Signal   string `json:"signal,omitempty"`
	TimedOut bool   `json:"timedOut,omitempty"`
	// Stopped: stepseq stopped the agent (shutdown, a retry): its end is no verdict.
	Stopped bool `json:"stopped,omitempty"`
}

// tryRecordSize pads the record so that each update is one pwrite over the last.
const tryRecordSize = 512

// ErrAgentAlive is returned when a step's try lock is held: an agent of that
// step still runs, and no second one may start.
var ErrAgentAlive = errors.New("an agent of this step is still running")

// tryLockTake bounds the wait for a try lock held for a moment by a reader
// (status takes a shared lock to look): a live agent holds it far longer.
var tryLockTake = 200 * time.Millisecond

// heldTry is a try lock this process took.
type heldTry struct {
	f   *os.File
	rec tryRecord
}

// takeTryLock takes step id's try lock for the try about to start and records it.
func takeTryLock(path string, rec tryRecord) (*heldTry, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("try lock: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("try lock: %w", err)
	}
	deadline := time.Now().Add(tryLockTake)
	for pause := time.Millisecond; ; pause = min(2*pause, 20*time.Millisecond) {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("%s: %w", path, ErrAgentAlive)
			}
			return nil, fmt.Errorf("try lock %s: %w", path, err)
		}
		time.Sleep(pause)
	}
	h := &heldTry{f: f, rec: rec}
	if err := h.save(); err != nil {
		f.Close()
		return nil, fmt.Errorf("try lock %s: %w", path, err)
	}
	if fi, err := f.Stat(); err == nil {
		h.rec.Began = fi.ModTime().UnixNano()
	}
	return h, nil
}

func (h *heldTry) save() error {
	data, _ := json.Marshal(h.rec)
	if pad := tryRecordSize - 1 - len(data); pad > 0 {
		data = append(data, bytes.Repeat([]byte(" "), pad)...)
	}
	data = append(data, '\n')
	_, err := h.f.WriteAt(data, 0)
	if err == nil && len(data) > tryRecordSize {
		err = h.f.Truncate(int64(len(data)))
	}
	return err
}

// started records the agent's pid, for a later stepseq to wait on and to see it
// alive even if it closed the inherited descriptor.
func (h *heldTry) started(pid int, ticks uint64) {
	if h == nil {
		return
	}
	h.rec.PID, h.rec.StartTicks = pid, ticks
	_ = h.save()
}

// ended records how the agent ended and releases the lock: nothing of the try
// runs any more (its group was swept before its Exit came).
func (h *heldTry) ended(exit core.Exit, stopped bool) {
	if h == nil || h.f == nil {
		return
	}
	h.rec.Exited, h.rec.Code, h.rec.TimedOut, h.rec.Stopped = true, exit.Code, exit.TimedOut, stopped
	if exit.Signal != nil {
		h.rec.Signal = exit.Signal.String()
	}
	if exit.Err != nil {
		h.rec.Stopped = true // it never ran, or waiting failed: no verdict of its own
	}
	_ = h.save()
	h.release()
}

// release gives the lock up without recording an end: the agent never started.
func (h *heldTry) release() {
	if h == nil || h.f == nil {
		return
	}
	h.f.Close()
	h.f = nil
}

// probeTry tests step id's try lock without keeping it, and reads its record for
// the try that started at started (agent.startedIso). It takes a shared lock,
// which a live agent's exclusive one refuses.
func probeTry(path, id string, try int, started string) core.TryState {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return core.TryState{}
	}
	defer f.Close()
	var s core.TryState
	held := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
	s.Alive = errors.Is(held, unix.EWOULDBLOCK)
	if held == nil {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	}
	var rec tryRecord
	data, err := ReadFile(path, recordCap)
	if err != nil || json.Unmarshal(bytes.TrimSpace(data), &rec) != nil {
		return s
	}
	if rec.Step != id || rec.Try != try || rec.Started != started {
		return s
	}
	s.Recorded, s.PID = true, rec.PID
	s.Exited, s.Code, s.Signal, s.TimedOut, s.Stopped = rec.Exited, rec.Code, rec.Signal, rec.TimedOut, rec.Stopped
	if rec.Began != 0 {
		s.Began = time.Unix(0, rec.Began)
	} else if fi, err := f.Stat(); err == nil {
		s.Began = fi.ModTime()
	}
	if !s.Alive && !rec.Exited && rec.PID > 0 {
		s.Alive = Alive(rec.PID, rec.StartTicks)
	}
	return s
}

// waitTry blocks until step id's try lock is free and its recorded agent is gone.
// The flock sleeps in the kernel; it cannot be cancelled, so a ctx that ends
// leaves it blocked until the agent ends or the process exits.
func waitTry(ctx context.Context, path string) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_CLOEXEC, 0)
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
	var rec tryRecord
	if data, err := ReadFile(path, recordCap); err == nil && json.Unmarshal(bytes.TrimSpace(data), &rec) == nil &&
		!rec.Exited && rec.PID > 0 && Alive(rec.PID, rec.StartTicks) {
		// The agent closed the descriptor it inherited: wait on its pid.
		_ = WaitGone(ctx, rec.PID)
	}
}
