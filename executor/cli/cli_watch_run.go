package cli

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/listener"
	"github.com/stepseq/stepseq/executor/mcp"
	"github.com/stepseq/stepseq/executor/metrics"
	"github.com/stepseq/stepseq/executor/notify"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/executor/web"
	"github.com/stepseq/stepseq/watcher"
)

// watchFlags are `stepseq watch`'s flags.
type watchFlags struct {
	ws           workspaceFlags
	poll         time.Duration
	grace        time.Duration
	settle       time.Duration
	listen       string
	door         doorFlags
	exitWhenDone bool
	maxAgents    int
	retain       string
	notifyCmds   []string
	notifyHooks  []string
}

// check refuses flags out of their range, as usage errors.
func (f *watchFlags) check() error {
	if f.maxAgents == 0 || f.maxAgents < -1 {
		return usageErr("--max-agents %d: want 1 or more, or -1 for no bound", f.maxAgents)
	}
	if f.grace < 0 {
		return usageErr("--grace %s: want 0 or more, like 5s (0: the default, %s)", f.grace, proc.DefaultGrace)
	}
	return nil
}

// run is `stepseq watch`: the sidecar, its notifier, and with --listen the
// page, /mcp and the health endpoints, until ctx ends.
func (f *watchFlags) run(ctx context.Context, g *globals, args []string) error {
	if err := f.check(); err != nil {
		return err
	}
	dir, state := f.ws.statePath(args)
	log := g.logger()
	rt, policy, err := longRunning(dir, state, f.retain, log)
	if err != nil {
		return err
	}
	defer rt.Close()
	rt.Grace = f.grace
	token, ln, err := f.door.apply(ctx, rt, f.listen, log)
	if err != nil {
		return err
	}
	if ln != nil {
		// Closed here if the start fails before it is served; serving
		// closes it at the end, and a second Close does nothing.
		defer ln.Close()
	}
	if fstype, network := watcher.NetworkFS(rt.WS.Dir); network && f.poll == 0 {
		log.Warn("the workspace is on a network filesystem that may deliver no file events; consider --poll 2s", "fs", fstype)
	}
	reg := metrics.NewRegistry()
	reg.MustRegister(metrics.Standard()...)
	sinks, err := flagSinks(f.notifyCmds, f.notifyHooks)
	if err != nil {
		return err
	}
	maxRetries, err := proc.MaxRetriesFromEnv(rt.Getenv)
	if err != nil {
		return err
	}
	// Once the flags are checked, an agent that can never launch here is
	// said at once, with exit 2, as check says it: not logged at each step
	// while the sidecar waits for ever.
	if err := rt.AgentAtStart(filepath.Join(rt.WS.Dir, "plans")); err != nil {
		return err
	}
	// The page reads the workspace through a runtime of its own, from
	// the requests' goroutines; the loop only tells it when to look.
	pageRT, err := engine.NewRuntime(state, log)
	if err != nil {
		return err
	}
	defer pageRT.Close()
	pageRT.ExposeEnv, pageRT.Sandbox = rt.ExposeEnv, rt.Sandbox
	page := web.NewWorkspace(pageRT, maxRetries, 0)
	// The notifier opens the outbox only once the sidecar holds the
	// workspace lock: one notifier per workspace.
	notes := &lateNotifier{}
	ready := make(chan struct{})
	sc, err := f.newSidecar(rt, reg, notes, page, func() { releaseStartPages(log); close(ready) })
	if err != nil {
		return err
	}
	// The state as the sidecar read it at its start serves the notifier's
	// and sayWhatWaits' reads: a large state is not read again for them.
	started := sc.StartState()
	notes.Follower, err = notify.NewFollowerOf(notifyConfig(rt, sinks, reg), rt.WS.State, started)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	// What the last transitions said goes out before the sidecar ends,
	// unless a sink is down: then it waits in the outbox.
	defer notes.Close(notifyFlush)
	if ln != nil {
		defer serveWatch(ctx, rt, sc, ln, token, reg, page, log)()
	}
	retention, stopRetention := context.WithCancel(ctx)
	defer stopRetention()
	// Retention prunes once the start is over: at a start that takes up
	// a thousand runs, its reads would share the CPU with the loop's.
	go func() {
		select {
		case <-ready:
			store.RunRetention(retention, rt.WS, policy, rt.Now, log)
		case <-retention.Done():
		}
	}()
	log.Info("watching", "dir", rt.WS.Dir, "state", rt.WS.State, "plans", filepath.Join(rt.WS.Dir, "plans"), "pid", os.Getpid())
	sayWhatWaits(rt, started, filepath.Join(rt.WS.Dir, "plans"), log)
	err = sc.Run(ctx)
	if errors.Is(err, engine.ErrPlanBlocked) {
		return &exitError{code: 1, err: err}
	}
	return err
}

// newSidecar makes the sidecar with its metrics: exit 2 when another holds
// the workspace or the watches run out.
func (f *watchFlags) newSidecar(rt *engine.Runtime, reg *metrics.Registry, notes *lateNotifier, page *web.Workspace, onReady func()) (*engine.Sidecar, error) {
	var sc *engine.Sidecar
	m := engine.NewMetrics(reg, func() (uint64, uint64, int) {
		if sc == nil {
			return 0, 0, 0
		}
		s := sc.WatcherStats()
		return s.Events, s.Overflows, s.Watches
	})
	sc, err := engine.NewSidecar(rt, engine.SidecarOptions{
		PlansDir: filepath.Join(rt.WS.Dir, "plans"), Settle: f.settle, Poll: f.poll,
		ExitWhenDone: f.exitWhenDone, Metrics: m,
		Notifier: notes, MaxAgents: f.maxAgents,
		OnChange: page.Poke, OnReady: onReady,
	})
	if errors.Is(err, store.ErrLocked) || errors.Is(err, watcher.ErrWatchLimit) {
		return nil, &exitError{code: 2, err: err}
	}
	return sc, err
}

// serveWatch serves the page, /mcp and the health endpoints on ln; stop ends it.
func serveWatch(ctx context.Context, rt *engine.Runtime, sc *engine.Sidecar, ln net.Listener, token string, reg *metrics.Registry, page *web.Workspace, log *slog.Logger) (stop func()) {
	if err := page.WatchFeed(ctx); err != nil {
		log.Warn("the live page will not see new notifications at once", "err", err)
	}
	h := web.New(page, pageOptions(page, token))
	mcpOpt := mcp.Options{Runtime: rt, Engine: mcp.SidecarEngine(sc), PlansDir: filepath.Join(rt.WS.Dir, "plans"), Version: version, Logger: log, Allow: rt.Allow,
		Authenticated: listener.Authenticated, TokenGuarded: token != ""}
	return serveHealth(ctx, healthServer{Listener: ln, Sidecar: sc, Registry: reg, Page: h, MCP: mcp.Handler(mcpOpt),
		Bound: engine.DefaultHealthBound, Token: token, LogErr: log.Error, Log: log})
}

// pageOptions are the live page's: behind the listener's token (and only
// there) its buttons answer a gate.
func pageOptions(page *web.Workspace, token string) web.Options {
	if token == "" {
		return web.Options{}
	}
	return web.Options{Gates: page, CSRF: listener.CSRFToken(token)}
}
