package cli

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"

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
	)
	cmd := &cobra.Command{
		Use:   "mcp [DIR]",
		Short: "Serve the MCP tools over stdio: submit plans, pull steps, report",
		Long: `mcp speaks the Model Context Protocol on stdin and stdout for the workspace
DIR (default .). It runs the sidecar itself unless one is live on the workspace;
then it acts through the workspace's files (plans, reports, triggers) like any
agent. Its tools: plan_validate, plan_submit, status, logs, notifications,
step_current, step_report, retry and trigger. A step with agent: mcp starts no
process: it is offered to the client that calls step_current, with a token for
that step and try. watch --listen serves the same tools at /mcp.
` + exitCodesHelp,
		Example: `  stepseq mcp ./workspace
  claude mcp add stepseq -- stepseq mcp /srv/workspace
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
			// Its own sidecar tells the user as watch's does: the feed, the
			// plan's sinks and the notifications tool. The notifier opens once
			// the sidecar holds the workspace lock.
			notes := &lateNotifier{}
			sc, err := engine.NewSidecar(rt, engine.SidecarOptions{PlansDir: opt.PlansDir, Notifier: notes,
				OnReady: func() { releaseStartPages(log) }})
			var loop chan error
			switch {
			case errors.Is(err, store.ErrLocked):
				// Beside a sidecar is how mcp is meant to run: the lock's advice to
				// stop its holder is for a second sidecar, not for this.
				holder, _, _ := strings.Cut(err.Error(), "; stop it first")
				log.Info("another stepseq holds the workspace: acting through its files", "dir", rt.WS.Dir, "holder", holder)
				if opt.Engine, err = mcp.FilesEngine(rt.WS); err != nil {
					return err
				}
			case err != nil:
				return err
			default:
				if notes.Follower, err = notify.NewFollower(notifyConfig(rt, nil, nil), rt.WS.State); err != nil {
					return &exitError{code: 2, err: err}
				}
				defer notes.Close(notifyFlush)
				opt.Engine = mcp.SidecarEngine(sc)
				loop = make(chan error, 1)
				go func() { loop <- sc.Run(ctx) }()
				go store.RunRetention(ctx, rt.WS, policy, rt.Now, log)
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
			if loop != nil {
				if lerr := <-loop; err == nil {
					err = lerr
				}
			}
			return err
		},
	}
	cmd.Flags().StringVar(&ws.state, "state", "", "state file (default DIR/state.json)")
	door.registerAllow(cmd)
	cmd.Flags().StringVar(&retain, "retain", "", "how long runs, logs and journals are kept: finished=30d,failed=90d (blocked or failed)")
	return cmd
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
