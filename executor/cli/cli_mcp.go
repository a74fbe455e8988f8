package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/mcp"
	"github.com/stepseq/stepseq/executor/notify"
	"github.com/stepseq/stepseq/executor/store"
)

func newMCPCmd(g *globals, stdout io.Writer) *cobra.Command {
	var (
		ws     workspaceFlags
		retain string
		door   doorFlags
		drive  bool
	)
	cmd := &cobra.Command{
		Use:   "mcp [DIR]",
		Short: "Serve the MCP tools over stdio: submit plans, pull steps, report",
		Long: `mcp speaks the Model Context Protocol on stdin and stdout for the workspace
DIR (default .). Merely started, it moves nothing: the plans, runs and state
already in DIR are shown, not driven, until a client acts (plan_submit,
run_start, retry, trigger, run_resume, a worker's step_current) or --drive
is given; status says so.
Then it runs the sidecar itself unless one is live on the workspace, where it
acts through the workspace's files (plans, reports, triggers) like any agent. Its tools: plan_validate, plan_submit, status, logs, notifications,
step_current, step_report, retry, trigger, plan_list, run_start, run_list,
run_resume and run_close. A step with agent: mcp starts no
process: it is offered to the client that calls step_current, with a token for
that step and try. watch --listen serves the same tools at /mcp.
` + exitCodesHelp,
		Example: `  stepseq mcp ./workspace
  claude mcp add stepseq -- stepseq mcp /srv/workspace
  stepseq mcp --drive ./workspace
  stepseq mcp --retain finished=7d,failed=30d`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, state := ws.statePath(args)
			log := g.logger()
			rt, policy, err := longRunning(dir, state, retain, log)
			if err != nil {
				return err
			}
			defer rt.Close()
			if _, _, err := door.apply(cmd.Context(), rt, "", log); err != nil {
				return err
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			opt := mcp.Options{Runtime: rt, PlansDir: filepath.Join(rt.WS.Dir, "plans"), Version: version, Logger: log, Allow: rt.Allow}
			side := &mcpSidecar{rt: rt, policy: policy, plansDir: opt.PlansDir, log: log}
			defer side.stop()
			if drive {
				if opt.Engine, err = side.start(ctx); err != nil {
					return err
				}
			} else {
				idle, err := mcp.FilesEngine(rt.WS)
				if err != nil {
					return err
				}
				opt.Engine = mcp.NewGate(idle, func() (mcp.Engine, error) { return side.start(ctx) })
			}
			srv := mcp.NewServer(opt)
			// The start is over twice: here, once the server is built, and at
			// the sidecar's ready, which may come before or after; each
			// release unmaps what the other's start left.
			releaseStartPages(log)
			err = srv.Run(ctx, &sdk.IOTransport{Reader: os.Stdin, Writer: nopCloser{stdout}})
			if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
				err = nil // the client left, or a signal
			}
			cancel()
			if lerr := side.wait(); err == nil {
				err = lerr
			}
			return err
		},
	}
	cmd.Flags().StringVar(&ws.state, "state", "", "state file (default DIR/state.json)")
	cmd.Flags().BoolVar(&drive, "drive", false, "drive what is already in DIR from the start, without waiting for a client to act")
	door.registerAllow(cmd)
	cmd.Flags().StringVar(&retain, "retain", "", "how long runs, logs and journals are kept: finished=30d,failed=90d (blocked or failed)")
	return cmd
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// mcpSidecar is the sidecar stepseq mcp runs once it may drive: at once with
// --drive, else at a client's first act.
type mcpSidecar struct {
	rt       *engine.Runtime
	policy   store.RetentionPolicy
	plansDir string
	log      *slog.Logger

	mu    sync.Mutex // start runs on a tool call's goroutine
	loop  chan error
	notes *lateNotifier
}

// start runs the sidecar, or, when another stepseq holds the workspace, acts
// through its files.
func (m *mcpSidecar) start(ctx context.Context) (mcp.Engine, error) {
	// Its own sidecar tells the user as watch's does: the feed, the plan's
	// sinks and the notifications tool. The notifier opens once the sidecar
	// holds the workspace lock.
	notes := &lateNotifier{}
	sc, err := engine.NewSidecar(m.rt, engine.SidecarOptions{PlansDir: m.plansDir, Notifier: notes,
		OnReady: func() { releaseStartPages(m.log) }})
	switch {
	case errors.Is(err, store.ErrLocked):
		// Beside a sidecar is how mcp is meant to run: the lock's advice to
		// stop its holder is for a second sidecar, not for this.
		holder, _, _ := strings.Cut(err.Error(), "; stop it first")
		m.log.Info("another stepseq holds the workspace: acting through its files", "dir", m.rt.WS.Dir, "holder", holder)
		return mcp.FilesEngine(m.rt.WS)
	case err != nil:
		return nil, err
	}
	if notes.Follower, err = notify.NewFollower(notifyConfig(m.rt, nil, nil), m.rt.WS.State); err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	loop := make(chan error, 1)
	m.mu.Lock()
	m.notes, m.loop = notes, loop
	m.mu.Unlock()
	go func() { loop <- sc.Run(ctx) }()
	go store.RunRetention(ctx, m.rt.WS, m.policy, m.rt.Now, m.log)
	return mcp.SidecarEngine(sc), nil
}

// wait returns the sidecar's end, once its context is over; nil when it never ran.
func (m *mcpSidecar) wait() error {
	m.mu.Lock()
	loop := m.loop
	m.loop = nil
	m.mu.Unlock()
	if loop == nil {
		return nil
	}
	return <-loop
}

func (m *mcpSidecar) stop() {
	m.mu.Lock()
	notes := m.notes
	m.mu.Unlock()
	if notes != nil {
		notes.Close(notifyFlush)
	}
}
