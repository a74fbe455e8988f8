package proc

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/store"
)

// Launcher starts a try's agent. The local process group is the one launcher
// today; an MCP worker that pulls its step and a Kubernetes Job are others.
type Launcher interface {
	Launch(t TrySpec) (Started, error)
}

// TrySpec is one try ready to start.
type TrySpec struct {
	Step    string
	Try     int
	Proc    Spec
	LogPath string // the try's full output
	// Prompt, RequiredOutputs and Result (the result schema) are what a pulled
	// try offers its worker; a process gets the prompt in Proc.Argv.
	Prompt          string
	RequiredOutputs []string
	Result          []byte
	// OnStart, when set, is told the agent's pid once its process exists: at
	// once, or after a shortage of resources has passed.
	OnStart func(pid int, startTicks uint64)
	// OnShortage, when set, is told once that the agent could not start for want
	// of resources (descriptors, processes, memory) and is started again after a
	// pause: the try is not spent.
	OnShortage func(err error)
}

// Started is a try whose agent was started.
type Started interface {
	// Done delivers the Exit once the agent has ended.
	Done() <-chan core.Exit
	// Stop ends the agent (SIGTERM to its group, SIGKILL after the grace period).
	Stop()
	// Ident is the agent's pid and start time, recorded in the lock so that a
	// restarted stepseq can wait for it; 0 while its process does not exist.
	Ident() (pid int, startTicks uint64)
	// LastOutput is when the agent last wrote a byte; zero when it never did.
	LastOutput() time.Time
	// Finish releases what the try holds once it is done: its log gets its footer.
	Finish(exit core.Exit) error
	// EndGroup stops what the agent left running in its process group, once the
	// try no longer waits on it (Spec.HoldGroup); it returns when they are gone.
	EndGroup()
}

// ProcessLauncher runs the agent as a local process in its own group, its output
// in the try's log.
type ProcessLauncher struct{}

// Launch starts the process. The log is created on the first byte of output:
// creating files is the slowest part of a step on many filesystems, and a silent
// agent needs none. A start refused for want of resources (EMFILE, ENFILE,
// EAGAIN, ENOMEM) is tried again with a growing pause until it succeeds, the
// try is stopped, or its timeout passes.
func (ProcessLauncher) Launch(t TrySpec) (Started, error) {
	r := &processRun{log: store.OpenTryLog(t.LogPath, store.TryHeader{Step: t.Step, Try: t.Try, Argv: t.Proc.Argv, Started: time.Now()}, 0),
		stop: make(chan struct{})}
	t.Proc.Log = &activity{w: r.log, last: &r.last}
	p, err := Start(t.Proc)
	switch {
	case err == nil:
		r.proc, r.done = p, p.Done()
		if t.OnStart != nil {
			t.OnStart(p.PID, p.StartTicks)
		}
	case Shortage(err):
		if t.OnShortage != nil {
			t.OnShortage(err)
		}
		done := make(chan core.Exit, 1)
		r.done = done
		go r.startAgain(t, err, done)
	default:
		return nil, err
	}
	return r, nil
}

// Shortage reports whether err is a start refused for want of resources, which
// pass: file descriptors (EMFILE, ENFILE), processes (EAGAIN) or memory (ENOMEM).
func Shortage(err error) bool {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.EAGAIN, syscall.ENOMEM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// shortagePause bounds the pause between starts during a shortage.
var shortagePause = 2 * time.Second

// startAgain starts the agent again after a shortage, its pause doubling from
// 10 ms, and hands its Exit on.
func (r *processRun) startAgain(t TrySpec, err error, done chan<- core.Exit) {
	timeout := t.Proc.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	began := time.Now()
	deadline := began.Add(timeout)
	for pause := 10 * time.Millisecond; ; pause = min(2*pause, shortagePause) {
		if !time.Now().Add(pause).Before(deadline) {
			done <- StartFailure(fmt.Errorf("%w (resources short for %s)", err, time.Since(began).Round(time.Second)))
			return
		}
		wait := time.NewTimer(pause)
		select {
		case <-r.stop:
			wait.Stop()
			done <- StartFailure(fmt.Errorf("stopped before it could start: %w", err))
			return
		case <-wait.C:
		}
		t.Proc.Timeout = time.Until(deadline)
		r.mu.Lock()
		if r.stopped {
			r.mu.Unlock()
			done <- StartFailure(fmt.Errorf("stopped before it could start: %w", err))
			return
		}
		var p *Process
		p, err = Start(t.Proc)
		if err == nil {
			r.proc = p
		}
		r.mu.Unlock()
		if err == nil {
			if t.OnStart != nil {
				t.OnStart(p.PID, p.StartTicks)
			}
			done <- <-p.Done()
			return
		}
		if !Shortage(err) {
			done <- StartFailure(err)
			return
		}
	}
}

type processRun struct {
	log  *store.TryLog
	last atomic.Int64
	done <-chan core.Exit

	mu      sync.Mutex
	proc    *Process // nil while a shortage delays the start
	stop    chan struct{}
	stopped bool
}

func (r *processRun) Done() <-chan core.Exit { return r.done }

func (r *processRun) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.proc != nil:
		r.proc.Stop()
	case !r.stopped:
		r.stopped = true
		close(r.stop)
	}
}

func (r *processRun) Ident() (int, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil {
		return 0, 0
	}
	return r.proc.PID, r.proc.StartTicks
}

func (r *processRun) LastOutput() time.Time {
	if n := r.last.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

func (r *processRun) Finish(exit core.Exit) error {
	r.mu.Lock()
	p := r.proc
	r.mu.Unlock()
	if p != nil {
		p.judged()
	}
	return r.log.Finish(exit)
}

func (r *processRun) EndGroup() {
	r.mu.Lock()
	p := r.proc
	r.mu.Unlock()
	if p != nil {
		p.EndGroup()
	}
}

// activity notes when output last came, for idleTimeout.
type activity struct {
	w    io.Writer
	last *atomic.Int64
}

func (a *activity) Write(b []byte) (int, error) {
	a.last.Store(time.Now().UnixNano())
	return a.w.Write(b)
}

// StartFailure is the Exit of an agent that could not be started.
func StartFailure(err error) core.Exit {
	now := time.Now()
	return core.Exit{Code: -1, Err: err, Started: now, Ended: now}
}
