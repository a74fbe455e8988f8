package executor

import (
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/stepseq/stepseq/planspec"
)

// Runtime is what every driver shares: the workspace, the environment the agents
// inherit, and how to log. One Runtime serves one workspace.
type Runtime struct {
	WS      Workspace
	Getenv  func(string) string
	Environ []string // the agents' base environment
	Grace   time.Duration
	Logger  *slog.Logger
	Journal *Journal
	Now     func() time.Time
	// PipeGrace bounds the wait for output pipes a grandchild keeps open.
	PipeGrace time.Duration
	// Lock is the workspace lock the driver holds; it records the running agent.
	Lock *Lock

	root *os.Root
}

// NewRuntime sets up a runtime for the workspace of statePath from the process's
// environment.
func NewRuntime(statePath string, logger *slog.Logger) (*Runtime, error) {
	ws, err := NewWorkspace(statePath)
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Runtime{
		WS:      ws,
		Getenv:  os.Getenv,
		Environ: os.Environ(),
		Grace:   DefaultGrace,
		Logger:  logger,
		Journal: &Journal{Path: ws.JournalPath()},
		Now:     time.Now,
	}, nil
}

func (r *Runtime) now() time.Time { return r.Now() }

// Root is the workspace opened as an os.Root, through which required outputs and
// conditions look at files: nothing outside it can be seen.
func (r *Runtime) Root() *os.Root {
	if r.root == nil {
		root, err := os.OpenRoot(r.WS.Dir)
		if err != nil {
			return nil
		}
		r.root = root
	}
	return r.root
}

// Close releases the runtime's files.
func (r *Runtime) Close() error {
	if r.root != nil {
		r.root.Close()
		r.root = nil
	}
	return r.Journal.Close()
}

func (r *Runtime) record(e Entry) {
	if err := r.Journal.Record(e); err != nil {
		r.Logger.Warn("journal not written", "err", err)
	}
}

// Prepared is one try ready to start: the agent resolved and the state marked.
type Prepared struct {
	Step string
	Try  int
	Proc Spec
}

// PrepareLaunch resolves the step's agent and, only once that succeeded, marks the
// try in st (IN_PROGRESS, tries, lastRunIso). A configuration error leaves st as it
// was.
func (r *Runtime) PrepareLaunch(st *planspec.State, d Decision, now time.Time) (Prepared, error) {
	agent, err := ResolveAgent(st, d.Step, r.Getenv, r.WS.Dir)
	if err != nil {
		return Prepared{}, err
	}
	try := BeginTry(st, d.Step, now, d.Interrupted)
	env := AgentEnv(r.Environ, d.Step, try, r.WS, nil)
	return Prepared{Step: d.Step, Try: try, Proc: Spec{
		Argv:      agent.Command(d.Prompt, nil),
		Dir:       r.WS.Dir,
		Env:       env,
		Timeout:   StepTimeout(st, d.Step),
		Grace:     r.Grace,
		PipeGrace: r.PipeGrace,
	}}, nil
}

// StepTimeout is the step's timeout, else the plan's, else the original's hour.
func StepTimeout(st *planspec.State, id string) time.Duration {
	if spec := st.Steps[id]; spec != nil && spec.Timeout > 0 {
		return time.Duration(spec.Timeout)
	}
	if st.Settings.Timeout > 0 {
		return time.Duration(st.Settings.Timeout)
	}
	return DefaultTimeout
}

// Active is a started try.
type Active struct {
	Prepared
	*Process
	log *lazyFile
}

// Start launches the try, its full output going to .stepseq/logs/<step>/<try>.log.
// The log is created on the first byte of output: creating files is the slowest
// part of a step on many filesystems, and a silent agent needs none.
func (r *Runtime) Start(l Prepared) (*Active, error) {
	logf := &lazyFile{path: r.WS.LogPath(l.Step, l.Try)}
	l.Proc.Log = logf
	p, err := Start(l.Proc)
	if err != nil {
		return nil, err
	}
	r.Lock.SetAgent(&AgentHandle{Step: l.Step, Try: l.Try, PID: p.PID, StartTicks: p.StartTicks})
	r.record(Entry{Event: "launch", Step: l.Step, Try: l.Try, Detail: map[string]any{"pid": p.PID, "argv0": l.Proc.Argv[0]}})
	return &Active{Prepared: l, Process: p, log: logf}, nil
}

// Finished closes the try's log and forgets its process.
func (r *Runtime) Finished(run *Active, exit Exit) {
	if err := run.log.Close(); err != nil {
		r.Logger.Warn("agent log", "step", run.Step, "err", err)
	}
	r.Lock.SetAgent(nil)
	r.record(Entry{Event: "exit", Step: run.Step, Try: run.Try, Detail: map[string]any{"code": exit.Code, "timedOut": exit.TimedOut, "ms": exit.Ended.Sub(exit.Started).Milliseconds()}})
}

// lazyFile creates its file, and the directories above it, on the first write.
type lazyFile struct {
	path string
	mu   sync.Mutex
	f    *os.File
	err  error
}

func (l *lazyFile) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil && l.err == nil {
		if l.err = os.MkdirAll(filepath.Dir(l.path), 0o755); l.err == nil {
			l.f, l.err = os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		}
	}
	if l.err != nil {
		return len(b), nil // a lost log never fails the agent; Close reports it
	}
	return l.f.Write(b)
}

func (l *lazyFile) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		if err := l.f.Close(); err != nil && l.err == nil {
			l.err = err
		}
	}
	return l.err
}

// startFailure is the Exit of an agent that could not be started.
func startFailure(err error) Exit {
	now := time.Now()
	return Exit{Code: -1, Err: err, Started: now, Ended: now}
}

// Conclude judges a finished try against the current state and records the verdict.
func (r *Runtime) Conclude(st *planspec.State, id string, exit Exit, check func() (bool, error)) Verdict {
	v := Judge(st.Steps[id], exit, r.Root(), check)
	Record(st, id, exit, v, r.now())
	detail := map[string]any{"ok": v.OK}
	if !v.OK {
		detail["error"] = v.Error
	}
	r.record(Entry{Event: "verdict", Step: id, Try: st.Run(id).Tries, Detail: detail})
	if v.OK {
		r.Logger.Info("step done", "step", id, "try", st.Run(id).Tries)
	} else {
		r.Logger.Warn("step failed", "step", id, "try", st.Run(id).Tries, "error", firstChars(v.Error, 120))
	}
	return v
}
