package engine

import (
	"log/slog"
	"os"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// Runtime is what every driver shares: the workspace, the environment the agents
// inherit, and how to log. One Runtime serves one workspace.
type Runtime struct {
	WS      store.Workspace
	Getenv  func(string) string
	Environ []string // the agents' base environment
	Grace   time.Duration
	Logger  *slog.Logger
	Journal *store.Journal
	Now     func() time.Time
	// PipeGrace bounds the wait for output pipes a grandchild keeps open.
	PipeGrace time.Duration
	// Lock is the workspace lock the driver holds; it records the running agent.
	Lock *store.Lock
	// Allow is --allow-agent: when not nil, the only agents launched.
	Allow *AllowList
	// ExposeEnv is --expose-env: the only names of the environment that env()
	// reads in a run whose plan arrived through a face (Settings.Face).
	ExposeEnv []string
	// Sandbox is --sandbox and --require-sandbox: every driver's machine
	// resolves its steps' sandboxes with it.
	Sandbox core.SandboxPolicy

	root *os.Root
	wt   worktreeRoots // steps' worktrees, opened for judging their files
}

// NewRuntime sets up a runtime for the workspace of statePath from the process's
// environment.
func NewRuntime(statePath string, logger *slog.Logger) (*Runtime, error) {
	ws, err := store.NewWorkspace(statePath)
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
		Grace:   proc.DefaultGrace,
		Logger:  logger,
		Journal: &store.Journal{Path: ws.JournalPath()},
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
	r.wt.closeAll()
	return r.Journal.Close()
}

func (r *Runtime) record(e core.Entry) {
	if err := r.Journal.Record(e); err != nil {
		r.Logger.Warn("journal not written", "err", err)
	}
}

// StepTimeout is the step's timeout, else the plan's, else the original's hour.
func StepTimeout(st *planspec.State, id string) time.Duration {
	if spec := st.Steps[id]; spec != nil && spec.Timeout > 0 {
		return time.Duration(spec.Timeout)
	}
	if st.Settings.Timeout > 0 {
		return time.Duration(st.Settings.Timeout)
	}
	return proc.DefaultTimeout
}
