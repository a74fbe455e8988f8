package executor

import (
	"io"
	"sync/atomic"
	"time"
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
}

// Started is a try whose agent was started.
type Started interface {
	// Done delivers the Exit once the agent has ended.
	Done() <-chan Exit
	// Stop ends the agent (SIGTERM to its group, SIGKILL after the grace period).
	Stop()
	// Ident is the agent's pid and start time, recorded in the lock so that a
	// restarted stepseq can wait for it.
	Ident() (pid int, startTicks uint64)
	// LastOutput is when the agent last wrote a byte; zero when it never did.
	LastOutput() time.Time
	// Finish releases what the try holds once it is done: its log gets its footer.
	Finish(exit Exit) error
	// EndGroup stops what the agent left running in its process group, once the
	// try no longer waits on it (Spec.HoldGroup); it returns when they are gone.
	EndGroup()
}

// ProcessLauncher runs the agent as a local process in its own group, its output
// in the try's log.
type ProcessLauncher struct{}

// Launch starts the process. The log is created on the first byte of output:
// creating files is the slowest part of a step on many filesystems, and a silent
// agent needs none.
func (ProcessLauncher) Launch(t TrySpec) (Started, error) {
	r := &processRun{log: OpenTryLog(t.LogPath, TryHeader{Step: t.Step, Try: t.Try, Argv: t.Proc.Argv, Started: time.Now()}, 0)}
	t.Proc.Log = &activity{w: r.log, last: &r.last}
	p, err := Start(t.Proc)
	if err != nil {
		return nil, err
	}
	r.Process = p
	return r, nil
}

type processRun struct {
	*Process
	log  *TryLog
	last atomic.Int64
}

func (r *processRun) Ident() (int, uint64) { return r.PID, r.StartTicks }

func (r *processRun) LastOutput() time.Time {
	if n := r.last.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

func (r *processRun) Finish(exit Exit) error { return r.log.Finish(exit) }

// activity notes when output last came, for idleTimeout.
type activity struct {
	w    io.Writer
	last *atomic.Int64
}

func (a *activity) Write(b []byte) (int, error) {
	a.last.Store(time.Now().UnixNano())
	return a.w.Write(b)
}
