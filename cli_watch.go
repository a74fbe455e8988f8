package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/stepseq/stepseq/executor"
	"github.com/stepseq/stepseq/watcher"
)

// workspaceFlags locate a workspace: DIR, and the state file in it.
type workspaceFlags struct {
	state string
}

func (f *workspaceFlags) statePath(args []string) (dir, state string) {
	dir = "."
	if len(args) > 0 {
		dir = args[0]
	}
	state = f.state
	if state == "" {
		state = filepath.Join(dir, "state.json")
	}
	return dir, state
}

func newWatchCmd(g *globals) *cobra.Command {
	var (
		ws           workspaceFlags
		poll         time.Duration
		grace        time.Duration
		settle       time.Duration
		listen       string
		exitWhenDone bool
	)
	cmd := &cobra.Command{
		Use:   "watch [DIR]",
		Short: "Run the sidecar: drive the workspace's plan on file events",
		Long: "watch runs the plan in DIR (default .) on file events: plans dropped in DIR/plans, " +
			"state.json written, outputs appearing, gates opening, triggers. One sidecar per workspace.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, state := ws.statePath(args)
			log := g.logger()
			rt, err := executor.NewRuntime(state, log)
			if err != nil {
				return err
			}
			defer rt.Close()
			rt.Grace = grace
			if fstype, network := watcher.NetworkFS(rt.WS.Dir); network && poll == 0 {
				log.Warn("the workspace is on a network filesystem that may deliver no file events; consider --poll 2s", "fs", fstype)
			}
			var sc *executor.Sidecar
			metrics := executor.NewMetrics(func() (uint64, uint64, int) {
				if sc == nil {
					return 0, 0, 0
				}
				s := sc.WatcherStats()
				return s.Events, s.Overflows, s.Watches
			})
			sc, err = executor.NewSidecar(rt, executor.SidecarOptions{
				PlansDir: filepath.Join(dir, "plans"), Settle: settle, Poll: poll,
				ExitWhenDone: exitWhenDone, Metrics: metrics,
			})
			if errors.Is(err, executor.ErrLocked) || errors.Is(err, watcher.ErrWatchLimit) {
				return &exitError{code: 2, err: err}
			}
			if err != nil {
				return err
			}
			if listen != "" {
				stop, err := serveHealth(cmd.Context(), listen, sc, metrics, log.Error)
				if err != nil {
					return &exitError{code: 2, err: err}
				}
				defer stop()
			}
			log.Info("watching", "dir", rt.WS.Dir, "state", rt.WS.State, "pid", os.Getpid())
			return sc.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&ws.state, "state", "", "state file (default DIR/state.json)")
	cmd.Flags().DurationVar(&poll, "poll", 0, "poll at this interval instead of file events (NFS, 9p, Docker Desktop mounts)")
	cmd.Flags().DurationVar(&grace, "grace", executor.DefaultGrace, "time between SIGTERM and SIGKILL for an agent")
	cmd.Flags().DurationVar(&settle, "settle", executor.DefaultSettle, "coalescing window for bursts of file events")
	cmd.Flags().StringVar(&listen, "listen", "", "serve /healthz, /readyz and /metrics on this address, e.g. :8080")
	cmd.Flags().BoolVar(&exitWhenDone, "exit-when-done", false, "exit 0 once the plan is DONE")
	return cmd
}

// serveHealth serves the probes and metrics until stop is called.
func serveHealth(ctx context.Context, addr string, sc *executor.Sidecar, metrics *executor.Metrics, logErr func(string, ...any)) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	probe := func(ok func() bool) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			if !ok() {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, "not ok\n")
				return
			}
			_, _ = io.WriteString(w, "ok\n")
		}
	}
	mux.Handle("/healthz", probe(sc.Alive))
	mux.Handle("/readyz", probe(sc.Ready))
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", executor.ContentType)
		_, _ = metrics.WriteTo(w)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logErr("health server", "err", err)
		}
	}()
	return func() {
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}, nil
}

func newTriggerCmd(g *globals, stdout io.Writer) *cobra.Command {
	var ws workspaceFlags
	cmd := &cobra.Command{
		Use:   "trigger STEP [DIR]",
		Short: "Re-run a step and the ones after it (for git hooks)",
		Long: "trigger queues a re-run of STEP under DIR/.stepseq/triggers/. A live sidecar runs it at once; " +
			"without one, the state is reset now and the next stepseq check runs it. It never waits for an agent.",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, state := ws.statePath(args[1:])
			rt, err := executor.NewRuntime(state, g.logger())
			if err != nil {
				return err
			}
			defer rt.Close()
			msg, err := executor.QueueTrigger(rt, args[0])
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(stdout, msg)
			return err
		},
	}
	cmd.Flags().StringVar(&ws.state, "state", "", "state file (default DIR/state.json)")
	return cmd
}
