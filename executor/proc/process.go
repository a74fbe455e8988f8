package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/proc/sandbox"
)

// DefaultTimeout is the original's limit on one run of a step.
const DefaultTimeout = 3600 * time.Second

// DefaultGrace is how long an agent has between SIGTERM and SIGKILL.
const DefaultGrace = 5 * time.Second

// captureBytes is what is kept of the head of each stream in memory: enough for
// ErrorChars characters of any UTF-8. The full output goes to the log file.
const captureBytes = core.ErrorChars * 4

// TailBytes is what is kept of the end of each stream, for the presets to read an
// agent's verdict (a JSON result, a failed turn) however long its output.
const TailBytes = 64 << 10

// Spec describes one agent process.
type Spec struct {
	Argv    []string
	Dir     string
	Env     []string
	Timeout time.Duration // 0: DefaultTimeout
	Grace   time.Duration // 0: DefaultGrace
	// PipeGrace bounds the wait for the output pipes after the agent exits, when a
	// grandchild still holds them. 0: one second.
	PipeGrace time.Duration
	Log       io.Writer // full output of both streams; nil: discarded
	// HoldGroup leaves the agent's process group alone when the agent exits 0 on
	// its own: a step that awaits its outputs (awaitOutputs) lets a background job
	// the agent started finish them. EndGroup stops the group when the wait ends.
	HoldGroup bool
	// TryLock is the try's lock, inherited by the agent as fd 3 and held by it
	// and its children however stepseq ends; a keeper that launches the agent
	// records its pid and its end in the lock's record, and keeps the lock
	// while anything of the try lives.
	TryLock *os.File
	// Files are inherited by the agent after the try lock (from fd 3 without one).
	Files []*os.File
	// StdoutTail is how much of the end of stdout Exit.StdoutTail keeps; 0:
	// TailBytes. A step whose result is its output keeps more, to find the
	// agent's final message in (planspec.MaxResultOutput).
	StdoutTail int
	// Sandbox, when set, runs the agent under bubblewrap (see InSandbox): Env is
	// then what stepseq sets, and the sandbox adds what it passes through.
	Sandbox *sandbox.Spec
	// KeepLines, when set, keeps every line of stdout that starts with it,
	// wherever it falls in the output (Exit.Lines): the lines a preset sums
	// its usage from (opencode's step_finish events).
	KeepLines string
}

// Process is a running agent in its own process group.
type Process struct {
	PID        int
	StartTicks uint64

	cmd    *exec.Cmd     // the agent, when this process started it
	kept   *keptAgent    // the agent, when a keeper started it
	pipes  []*os.File    // the read ends of a kept agent's output
	copied chan struct{} // one a stream of a kept agent, once read to its end
	left   bool          // the keeper reaped the agent with something of its try still running
	grace  time.Duration
	hold   bool
	boxed  bool // runs in a sandbox, whose exit status says a signal as 128+N
	stop   chan struct{}
	once   sync.Once
	ended  sync.Once // the group's sweep, run once
	marks  []string  // the try's variables, which its descendants carry
	done   chan core.Exit
	stdout capture
	stderr capture
}

// Start launches the agent in its own process group. Its Exit arrives on Done.
func Start(spec Spec) (*Process, error) {
	if len(spec.Argv) == 0 {
		return nil, errors.New("start agent: empty argv")
	}
	if spec.Timeout <= 0 {
		spec.Timeout = DefaultTimeout
	}
	if spec.Grace <= 0 {
		spec.Grace = DefaultGrace
	}
	if spec.PipeGrace <= 0 {
		spec.PipeGrace = time.Second
	}
	argv, env, attr, err := command(spec)
	if err != nil {
		return nil, fmt.Errorf("start agent %s: %w", spec.Argv[0], err)
	}
	p := &Process{grace: spec.Grace, hold: spec.HoldGroup, boxed: spec.Sandbox != nil, stop: make(chan struct{}), done: make(chan core.Exit, 1)}
	p.stdout.keep = max(spec.StdoutTail, TailBytes)
	p.stdout.head = stdoutHead
	p.stdout.lines.prefix = []byte(spec.KeepLines)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = env
	// The attributes the sandbox (or the bare run) gives are the agent's,
	// whoever starts it: this process or the keeper.
	cmd.SysProcAttr = attr
	p.marks = tryMarks(spec.Env)
	log := spec.Log
	if log == nil {
		log = io.Discard
	}
	stdout, stderr := &tee{capture: &p.stdout, log: log}, &tee{capture: &p.stderr, log: log}
	k, err := theKeeper()
	if err != nil {
		return nil, fmt.Errorf("start agent %s: %w", spec.Argv[0], err)
	}
	if k != nil {
		return p.startKept(k, cmd, spec, stdout, stderr)
	}
	cmd.WaitDelay = spec.PipeGrace
	cmd.ExtraFiles = spec.Files
	if spec.TryLock != nil {
		cmd.ExtraFiles = append([]*os.File{spec.TryLock}, spec.Files...)
	}
	// Stdin stays nil: the agent reads the null device (os.DevNull), so a CLI that
	// waits on an open stdin (codex exec) sees end of file at once, whatever
	// stepseq's own stdin is.
	cmd.Stdout, cmd.Stderr = stdout, stderr
	becomeSubreaper()
	started := time.Now()
	if err := startChild(cmd); err != nil {
		return nil, fmt.Errorf("start agent %s: %w", spec.Argv[0], err)
	}
	p.cmd = cmd
	p.PID = cmd.Process.Pid
	p.StartTicks, _ = StartTicks(p.PID)
	go p.wait(spec.Timeout, started, spec.PipeGrace)
	return p, nil
}

// startKept has the keeper start the agent, as Start would, with pipes of this
// process's own for its output.
func (p *Process) startKept(k *keeperClient, cmd *exec.Cmd, spec Spec, stdout, stderr io.Writer) (*Process, error) {
	fail := func(err error) (*Process, error) { return nil, fmt.Errorf("start agent %s: %w", spec.Argv[0], err) }
	if cmd.Err != nil {
		return fail(cmd.Err)
	}
	dir := cmd.Dir
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fail(err)
		}
		dir = wd
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return fail(err)
	}
	files, lock := []*os.File{outW, errW}, -1
	if spec.TryLock != nil {
		files, lock = append(files, spec.TryLock), 0
	}
	started := time.Now()
	a, err := k.launch(cmd.Path, cmd.Args, cmd.Environ(), dir, cmd.SysProcAttr, lock, append(files, spec.Files...))
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return fail(err)
	}
	p.kept, p.PID, p.StartTicks = a, a.pid, a.ticks
	p.pipes = []*os.File{outR, errR}
	p.copied = make(chan struct{}, 2)
	for i, w := range []io.Writer{stdout, stderr} {
		go func() {
			_, _ = io.Copy(w, p.pipes[i])
			p.copied <- struct{}{}
		}()
	}
	go p.wait(spec.Timeout, started, spec.PipeGrace)
	return p, nil
}

// Done delivers the Exit once the agent has ended and its output is collected.
func (p *Process) Done() <-chan core.Exit { return p.done }

// Stop ends the agent's process group: SIGTERM, then SIGKILL after the grace period.
// Whatever ends the agent, what is left of its group is ended before its Exit is
// delivered (see sweep), unless the group is held (Spec.HoldGroup).
func (p *Process) Stop() { p.once.Do(func() { close(p.stop) }) }

// EndGroup stops what is left of the agent's process group, as its exit does for a
// group that is not held; it returns once the group is gone. It is safe to call
// more than once, and from any goroutine once Done has delivered.
func (p *Process) EndGroup() { p.ended.Do(p.sweep) }

// agentEnd is how the agent ended, as its reaper saw it.
type agentEnd struct {
	status syscall.WaitStatus
	reaped bool  // status is the agent's
	err    error // waiting failed: the end is not the agent's own
}

// awaitEnd waits for the agent to end and for its output, PipeGrace at most
// once it has ended.
func (p *Process) awaitEnd(pipeGrace time.Duration) agentEnd {
	if p.kept == nil {
		err := p.cmd.Wait()
		forgetChild(p.PID)
		var end agentEnd
		if st := p.cmd.ProcessState; st != nil {
			end.status, end.reaped = st.Sys().(syscall.WaitStatus)
		}
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
			end.err = err
		}
		return end
	}
	ws, left, err := p.kept.end()
	return p.keptEnded(ws, left, err, pipeGrace)
}

// keptEnded is a kept agent's end as its keeper (or, the keeper lost, this
// process) reaped it, once its output is read.
func (p *Process) keptEnded(ws syscall.WaitStatus, left bool, err error, pipeGrace time.Duration) agentEnd {
	p.left = left
	p.drainOutput(pipeGrace)
	return agentEnd{status: ws, reaped: err == nil, err: err}
}

// drainOutput waits for a kept agent's output to be read to its end, pipeGrace
// at most, then closes the pipes.
func (p *Process) drainOutput(pipeGrace time.Duration) {
	timer := time.NewTimer(pipeGrace)
	defer timer.Stop()
	for range 2 {
		select {
		case <-p.copied:
		case <-timer.C:
			// A process the agent left holds its output open: stop reading it.
			for _, f := range p.pipes {
				_ = f.SetReadDeadline(time.Now())
			}
			<-p.copied
		}
	}
	for _, f := range p.pipes {
		f.Close()
	}
}

func (p *Process) wait(timeout time.Duration, started time.Time, pipeGrace time.Duration) {
	exited := make(chan agentEnd, 1)
	// A kept agent's end is the keeper's answer, taken here as it comes; only
	// once the keeper is lost does a goroutine wait for it otherwise.
	var answers <-chan keeperAnswer
	var lost <-chan struct{}
	if p.kept == nil {
		go func() { exited <- p.awaitEnd(pipeGrace) }()
	} else {
		answers, lost = p.kept.ends()
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var kill <-chan time.Time
	stop := p.stop
	timedOut := false
	for {
		select {
		case <-lost:
			answers, lost = nil, nil
			go func() { exited <- p.awaitEnd(pipeGrace) }()
		case ans := <-answers:
			forgetChild(p.PID)
			exited <- p.keptEnded(ans.status, ans.left, nil, pipeGrace)
			answers, lost = nil, nil
		case end := <-exited:
			e := p.exit(end, timedOut, started)
			// A held group outlives an agent that exited 0 by itself; one that
			// failed, timed out or was stopped takes its group with it.
			if !p.hold || timedOut || stop == nil || e.Code != 0 {
				p.EndGroup()
			}
			p.done <- e
			return
		case <-timer.C:
			timedOut = true
			kill = p.terminate(noteTimedOut)
		case <-stop:
			stop = nil
			kill = p.terminate(noteStopped)
		case <-kill:
			_ = syscall.Kill(-p.PID, syscall.SIGKILL)
			kill = nil
		}
	}
}

// terminate sends SIGTERM to the group and returns when to follow with SIGKILL.
// A keeper hears first why the agent ends, for its record.
func (p *Process) terminate(why uint64) <-chan time.Time {
	if p.kept != nil {
		p.kept.note(why)
	}
	_ = syscall.Kill(-p.PID, syscall.SIGTERM)
	return time.After(p.grace)
}

// sweep ends what is left of the agent's process group once the agent has
// exited, and what it started outside the group: a background child it left,
// however it treats SIGTERM and in whatever session, does not outlive its step. Anything left gets SIGTERM, then SIGKILL after the grace period. The
// group's id stays reserved while any member lives, so the signal cannot reach a
// stranger that reused the agent's pid.
func (p *Process) sweep() {
	alive := p.sweepGroup()
	if p.kept != nil {
		// What left the group and lost its parent is the keeper's (see
		// keeper_linux.go), which said whether anything of the try was left.
		if alive || p.left {
			endKept(p.kept, p.marks, p.grace)
		}
		return
	}
	// What left the group and lost its parent is stepseq's (see reaper_linux.go).
	endReparented(p.PID, p.marks, p.grace)
}

// judged tells the keeper, if one launched the agent, that the try is judged.
func (p *Process) judged() {
	if p.kept != nil {
		p.kept.judged()
	}
}

// sweepGroup ends the group; it reports whether anything of it was alive.
func (p *Process) sweepGroup() bool {
	if !GroupAlive(p.PID) {
		return false
	}
	_ = syscall.Kill(-p.PID, syscall.SIGTERM)
	deadline := time.Now().Add(p.grace)
	for wait := time.Millisecond; time.Now().Before(deadline); wait = min(2*wait, 50*time.Millisecond) {
		// The members are not this process's children: nothing to wait on but the
		// group itself, looked at again with a growing pause.
		time.Sleep(wait)
		if !GroupAlive(p.PID) {
			return true
		}
	}
	_ = syscall.Kill(-p.PID, syscall.SIGKILL)
	// SIGKILL takes effect when the kernel next schedules each member: the step
	// is over once they are gone (a second at most, for a machine under load).
	for wait, end := time.Millisecond, time.Now().Add(time.Second); GroupAlive(p.PID) && time.Now().Before(end); wait = min(2*wait, 50*time.Millisecond) {
		time.Sleep(wait)
	}
	return true
}

// GroupAlive reports whether process group pgid has a member that is not a zombie.
// A zombie has ended: it only waits for its parent (init, once the agent is gone)
// to collect it.
func GroupAlive(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false // ESRCH: the group is empty
	}
	return groupHasLiving(pgid)
}

func (p *Process) exit(end agentEnd, timedOut bool, started time.Time) core.Exit {
	e := core.Exit{Code: -1, TimedOut: timedOut, Started: started, Ended: time.Now(),
		Stdout: p.stdout.String(), Stderr: p.stderr.String(),
		StdoutTail: p.stdout.Tail(), StderrTail: p.stderr.Tail(), Err: end.err, Lines: p.stdout.Lines()}
	if end.reaped {
		e.Code = end.status.ExitStatus()
		if end.status.Signaled() {
			e.Code, e.Signal = -1, end.status.Signal()
		} else if sig, ok := sandboxSignal(e.Code); ok && p.boxed {
			e.Code, e.Signal = -1, sig
		}
	}
	return e
}

// tee feeds one of the agent's streams to its capture, then to the log. The
// capture comes first and the log's errors are dropped: logging never decides a
// step, and what the agent said reaches the verdict whatever the disk does. (A
// TryLog keeps its own first error for the driver to report.)
type tee struct {
	capture *capture
	log     io.Writer
}

func (t *tee) Write(b []byte) (int, error) {
	_, _ = t.capture.Write(b)
	_, _ = t.log.Write(b)
	return len(b), nil
}

// capture keeps the first head bytes (0: captureBytes) and the last keep bytes
// (0: TailBytes) written to it, and the lines that lines asks for.
type capture struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	head  int
	keep  int
	tail  []byte // the last bytes; trimmed to keep when it doubles
	lines lineKeeper
}

// stdoutHead is what is kept of the head of stdout: claude's JSON result, a
// single line however long its answer, names its usage in its first members.
const stdoutHead = 16 << 10

func (c *capture) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines.write(b)
	head := c.head
	if head <= 0 {
		head = captureBytes
	}
	if room := head - c.buf.Len(); room > 0 {
		c.buf.Write(b[:min(room, len(b))])
	}
	keep := c.tailBytes()
	if len(b) >= keep {
		c.tail = append(c.tail[:0], b[len(b)-keep:]...)
	} else {
		if len(c.tail)+len(b) > 2*keep {
			c.tail = append(c.tail[:0], c.tail[len(c.tail)-(keep-len(b)):]...)
		}
		c.tail = append(c.tail, b...)
	}
	return len(b), nil
}

func (c *capture) tailBytes() int {
	if c.keep > 0 {
		return c.keep
	}
	return TailBytes
}

// Tail returns the last bytes written, as many as the capture keeps.
func (c *capture) Tail() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.tail[max(0, len(c.tail)-c.tailBytes()):])
}

// Lines are the whole lines kept, the last one even without its newline.
func (c *capture) Lines() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lines.all()
}

func (c *capture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// Alive reports whether pid is still the process that started at ticks.
func Alive(pid int, ticks uint64) bool {
	if pid <= 0 {
		return false
	}
	t, err := StartTicks(pid)
	return err == nil && t == ticks
}

// WaitGone blocks until the process pid exits or ctx ends. It works for processes
// that are not children (an agent left by an earlier stepseq), through a pidfd on
// Linux and kqueue's EVFILT_PROC on macOS and the BSDs, so it sleeps in the kernel
// rather than polling.
func WaitGone(ctx context.Context, pid int) error {
	return waitGone(ctx, pid)
}
