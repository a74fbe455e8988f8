package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/internal/exepages"
	"github.com/stepseq/stepseq/executor/listener"
	"github.com/stepseq/stepseq/executor/metrics"
	"github.com/stepseq/stepseq/executor/notify"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/executor/web"
	"github.com/stepseq/stepseq/planspec"
	"github.com/stepseq/stepseq/planspec/plan"
)

// workspaceFlags locate a workspace: DIR, and the state file in it: --state, or
// the run --run names, or DIR/state.json.
type workspaceFlags struct {
	state string
	run   string
}

func (f *workspaceFlags) statePath(args []string) (dir, state string) {
	dir = "."
	if len(args) > 0 {
		dir = args[0]
	}
	state = f.state
	if state == "" {
		state = store.RunStatePath(dir, f.run)
	}
	return dir, state
}

// addRunFlag gives cmd --run, checked before the command runs; fromEnv: its
// default is $STEPSEQ_RUN, which stepseq sets for the agents it starts.
func (f *workspaceFlags) addRunFlag(cmd *cobra.Command, fromEnv bool) {
	usage := "the run: state.RUN.json; main, the default, is state.json"
	if fromEnv {
		usage = "the run: state.RUN.json; default $STEPSEQ_RUN, else main (state.json)"
	}
	cmd.Flags().StringVar(&f.run, "run", "", usage)
	pre := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if fromEnv && f.run == "" && f.state == "" {
			f.run = os.Getenv("STEPSEQ_RUN")
		}
		if f.run != "" {
			if f.state != "" {
				return usageErr("--run and --state name the state file both: give one")
			}
			if err := store.ValidRunName(f.run); err != nil {
				return usageErr("--run: %v", err)
			}
		}
		if pre != nil {
			return pre(c, args)
		}
		return nil
	}
}

// requireFolders refuses folders that do not exist, with exit 2: a sidecar on a
// mistyped path would make it and wait there for ever.
func requireFolders(dirs ...string) error {
	for _, d := range dirs {
		fi, err := os.Stat(d)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return &exitError{code: 2, err: store.NoFolder(d)}
		case err != nil:
			return &exitError{code: 2, err: err}
		case !fi.IsDir():
			return usageErr("%s is a file, not a folder: pass the workspace folder", d)
		}
	}
	return nil
}

func newWatchCmd(g *globals) *cobra.Command {
	var f watchFlags
	cmd := &cobra.Command{
		Use:   "watch [DIR]",
		Short: "Run the sidecar: drive the workspace's plan on file events",
		Long: `watch runs the plan in DIR (default .) on file events: plans dropped in DIR/plans,
state.json written, outputs appearing, gates opening, triggers. It uses no CPU while
idle. One sidecar per workspace: a second one on the same DIR exits 2. DIR must exist.

It drives every run of the workspace: state.json, and each state.NAME.json beside
it (stepseq start, or written by hand), side by side, with at most --max-agents
agents running at once, an agent a stepseq before it left running among them; a
run's broken file, failure or block stays its own. stepseq runs lists them;
stepseq close RUN closes one.

It exits 2 at its start when it could never launch the agent its workspace waits
for, with the message check gives: STEP_AGENT_CMD a shell (whatever the plans), or
STEP_AGENT_CMD unset or not found while a step of a run that can go on, or of a plan
in DIR/plans, names no agent of its own (agent: in the plan or the step). Plans that
all name their agent need no STEP_AGENT_CMD; an empty workspace waits for its first
plan, as check with no state has nothing to do.

SIGINT or SIGTERM stops it gracefully (the agent gets SIGTERM, then SIGKILL after
--grace); a second signal once the stop is under way exits at once.

Every transition of the plan is a notification (dispatching, accepted, milestone,
done, blocked, timeout, the plan's end, a heartbeat): it is appended to
DIR/.stepseq/notifications.jsonl and delivered, at least once and in order, to the
plan's notify: sinks and to those of --notify-command and --notify-webhook.
--exit-when-done exits 0 once the plan is DONE and 1 once it is blocked; with no
plan that can run it exits too: 2 when the agent can never launch here (STEP_AGENT_CMD
unset and no agent in the plan, the plan's agent refused or not on PATH), 1 when
every plan in the folder is invalid.
` + exitCodesHelp + agentEnvHelp,
		Example: `  STEP_AGENT_CMD='openclaw agent --message' stepseq watch .
  stepseq watch ./workspace --listen 127.0.0.1:8080 # the live page, /mcp, /healthz, /readyz, /metrics
  stepseq watch . --listen :8080 --token-file token # beyond loopback: /mcp and the page want the token
  stepseq watch . --notify-command 'notify-send stepseq'
  stepseq watch . --notify-webhook https://ntfy.sh/my-topic
  stepseq watch . --exit-when-done                  # for CI: exit once DONE
  stepseq watch /mnt/nfs/ws --poll 2s               # no file events on NFS`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return f.run(cmd.Context(), g, args) },
	}
	cmd.Flags().StringVar(&f.ws.state, "state", "", "state file (default DIR/state.json)")
	cmd.Flags().DurationVar(&f.poll, "poll", 0, "poll at this interval instead of file events (NFS, 9p, Docker Desktop mounts)")
	cmd.Flags().DurationVar(&f.grace, "grace", proc.DefaultGrace, "time between SIGTERM and SIGKILL for an agent")
	cmd.Flags().DurationVar(&f.settle, "settle", engine.DefaultSettle, "coalescing window for bursts of file events")
	cmd.Flags().StringVar(&f.listen, "listen", "", "serve the live page at /, the MCP tools at /mcp, and /healthz, /readyz and /metrics, on this address, e.g. 127.0.0.1:8080 (beyond loopback it needs a token)")
	f.door.register(cmd)
	cmd.Flags().IntVar(&f.maxAgents, "max-agents", engine.DefaultMaxAgents, "at most this many agents running at once across the workspace's runs (state.json and each state.NAME.json), those a stepseq before it left running among them; pulled steps (agent: mcp) do not count; -1: no bound")
	cmd.Flags().BoolVar(&f.exitWhenDone, "exit-when-done", false, "exit 0 once the plan is DONE, 1 once it is blocked, 2 when its agent can never launch")
	cmd.Flags().StringArrayVar(&f.notifyCmds, "notify-command", nil, "run this command for each notification, the JSON on stdin (split on white space, no shell; repeatable)")
	cmd.Flags().StringArrayVar(&f.notifyHooks, "notify-webhook", nil, "POST each notification's JSON to this http(s) URL (repeatable)")
	cmd.Flags().StringVar(&f.retain, "retain", "", "how long runs, logs and journals are kept: finished=30d,failed=90d (blocked or failed)")
	return cmd
}

// releaseStartPages is watch's last act of start-up: the code and read-only
// data that start-up alone used (every package's initialisers, the command
// tree, the first pass) are unmapped, and mapped again page by page if used
// again. An idle sidecar's RSS drops from about 14 MB to about 7.
func releaseStartPages(log *slog.Logger) {
	if _, err := exepages.Release(); err != nil {
		log.Debug("start-up pages kept mapped", "err", err)
	}
}

// notifyFlush bounds the wait for the sinks when a command that notifies ends.
const notifyFlush = 2 * time.Second

// lateNotifier is the sidecar's notifier, whose follower is opened once the
// sidecar holds the workspace lock, before anything is notified.
type lateNotifier struct {
	*notify.Follower
}

// flagSinks are the sinks of --notify-command and --notify-webhook.
func flagSinks(cmds, hooks []string) ([]notify.SinkConfig, error) {
	var sinks []notify.SinkConfig
	for _, c := range cmds {
		argv := strings.Fields(c)
		if len(argv) == 0 {
			return nil, usageErr("--notify-command: empty command")
		}
		sinks = append(sinks, notify.SinkConfig{Command: argv})
	}
	for _, h := range hooks {
		if err := planspec.CheckWebhook(h); err != nil {
			return nil, usageErr("--notify-webhook %q: %v", h, err)
		}
		sinks = append(sinks, notify.SinkConfig{Webhook: h})
	}
	return sinks, nil
}

// notifyConfig is the notifier of a workspace: metrics on reg (nil: none), and
// every report given up journaled.
func notifyConfig(rt *engine.Runtime, sinks []notify.SinkConfig, reg *metrics.Registry) notify.Config {
	journal, log := rt.Journal, rt.Logger
	var allowCommand func([]string) bool
	if allow := rt.Allow; allow != nil {
		allowCommand = func(argv []string) bool { return allow.PermitsCommand(argv, rt.WS.Dir) }
	}
	return notify.Config{
		Dir: rt.WS.Dir, Sinks: sinks, Logger: log, Registerer: reg, AllowPlanCommand: allowCommand,
		// Every notifier the commands open is a driver's, which publishes
		// once an input's state writes are done.
		HoldUntilPublished: true,
		OnGiveUp: func(sink string, r notify.Notice, err error) {
			e := core.Entry{Event: "notify-give-up", Step: r.Step, Try: r.Try, Reason: err.Error(),
				Detail: map[string]any{"sink": sink}}
			if r.ID != "" {
				e.Detail["id"], e.Detail["status"] = r.ID, r.Status
			}
			if err := journal.Record(e); err != nil {
				log.Warn("journal not written", "err", err)
			}
		},
	}
}

// healthServer is what --listen serves: the probes and the metrics, open to
// all; the page and the MCP tools, behind the token when there is one.
type healthServer struct {
	Listener net.Listener // bound by the door (doorFlags.apply), served until stop
	Sidecar  *engine.Sidecar
	Registry *metrics.Registry
	Page     *web.Handler
	MCP      http.Handler
	Bound    time.Duration // /healthz fails once the loop is stuck in one turn past it
	Token    string        // "": none
	LogErr   func(string, ...any)
	Log      *slog.Logger // says where it listens; nil: nothing
}

// serveHealth serves hs until stop is called, bounded as listener.Server is.
func serveHealth(ctx context.Context, hs healthServer) (stop func()) {
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
	guard := listener.NewGuard(hs.Token, hs.Registry)
	mux.Handle("/healthz", probe(func() bool { return hs.Sidecar.Healthy(time.Now(), hs.Bound) }))
	mux.Handle("/readyz", probe(hs.Sidecar.Ready))
	mux.Handle("/metrics", hs.Registry)
	if hs.MCP != nil {
		mux.Handle("/mcp", guard.MCP(hs.MCP))
	}
	srv := &listener.Server{Handler: mux, ErrorLog: hs.LogErr}
	if hs.Page != nil {
		mux.Handle("/", guard.Page(hs.Page))
		srv.OnShutdown = hs.Page.Close
	}
	addr := srv.Serve(hs.Listener)
	if hs.Log != nil {
		hs.Log.Info("listening: the live page, /mcp, /healthz, /readyz and /metrics", "addr", addr.String(), "url", "http://"+addr.String()+"/")
	}
	return func() {
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}
}

func newTriggerCmd(g *globals, stdout io.Writer) *cobra.Command {
	return queueCmd(g, stdout, &cobra.Command{
		Use:   "trigger STEP [DIR]",
		Short: "Re-run a step and the ones after it (for git hooks)",
		Long: `trigger queues a re-run of STEP, and the steps after it, under
DIR/.stepseq/triggers/. A live sidecar runs it at once; without one, the state is
reset now and the next stepseq check runs it. It never waits for an agent, so git
hooks can call it.
` + exitCodesHelp,
		Example: `  stepseq trigger build
  stepseq trigger test ./workspace`,
	}, engine.Commands.Trigger, "trigger", 0)
}

// queueCmd completes a command that queues a request for STEP in the workspace
// (trigger, retry): the arguments, step completion, --state, and the answer.
// refused is the exit code of a request the queue refuses (0: as the error says).
func queueCmd(g *globals, stdout io.Writer, cmd *cobra.Command, ask func(engine.Commands, context.Context, string, string) (string, error), from string, refused int) *cobra.Command {
	var ws workspaceFlags
	cmd.Args = cobra.RangeArgs(1, 2)
	cmd.ValidArgsFunction = stepCompletion(&ws)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		_, state := ws.statePath(args[1:])
		rt, err := engine.NewRuntime(state, g.logger())
		if err != nil {
			return err
		}
		defer rt.Close()
		msg, err := ask(engine.Commands{WS: rt.WS, RT: rt}, cmd.Context(), args[0], from)
		if err != nil {
			if refused != 0 {
				return &exitError{code: refused, err: err}
			}
			return err
		}
		_, err = fmt.Fprintln(stdout, msg)
		return err
	}
	cmd.Flags().StringVar(&ws.state, "state", "", "state file (default DIR/state.json)")
	ws.addRunFlag(cmd, true)
	return cmd
}

// longRunning sets up what watch and mcp share: the workspace must exist, the
// retention must parse (else a usage error), and the runtime opens.
func longRunning(dir, state, retain string, log *slog.Logger) (*engine.Runtime, store.RetentionPolicy, error) {
	if err := requireFolders(dir, filepath.Dir(state)); err != nil {
		return nil, store.RetentionPolicy{}, err
	}
	policy, err := store.ParseRetention(retain)
	if err != nil {
		return nil, store.RetentionPolicy{}, usageErr("%v", err)
	}
	rt, err := engine.NewRuntime(state, log)
	if err != nil {
		return nil, store.RetentionPolicy{}, err
	}
	return rt, policy, nil
}

// sayWhatWaits tells a sidecar's first user what it waits for, once, at start: where
// a plan goes when there is none, and that no step can launch when STEP_AGENT_CMD is
// unset and no plan names an agent. st is the state as read at the start, nil
// when it could not be read; it is read here again only then.
func sayWhatWaits(rt *engine.Runtime, st *planspec.State, plansDir string, log *slog.Logger) {
	var stateErr error
	if st == nil {
		st, stateErr = (&store.StateFile{Path: rt.WS.State}).Read()
	}
	var plans []*plan.Plan
	entries, _ := os.ReadDir(plansDir)
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !(strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
			continue
		}
		if pf := engine.ReadPlanFile(filepath.Join(plansDir, n), n); pf.Plan != nil {
			plans = append(plans, pf.Plan)
		}
	}
	for _, s := range engine.StrayPlans(rt.WS, plansDir) {
		log.Warn("a plan in the wrong place is not read", "file", s.Path, "fix", s.Fix)
	}
	if errors.Is(stateErr, fs.ErrNotExist) && len(plans) == 0 {
		log.Info("no plan yet: drop one in plans/ (stepseq init makes an example) or write state.json", "plans", plansDir, "state", rt.WS.State)
	}
	if strings.TrimSpace(rt.Getenv("STEP_AGENT_CMD")) != "" || namesAgent(st, plans) {
		return
	}
	log.Warn("STEP_AGENT_CMD is not set and no plan names an agent: no step can launch until one does (set STEP_AGENT_CMD, or agent: in the plan)")
}

// namesAgent reports whether the state or a plan names an agent of its own, for the
// plan or for one of its steps.
func namesAgent(st *planspec.State, plans []*plan.Plan) bool {
	if st != nil {
		if !st.Settings.Agent.IsZero() {
			return true
		}
		for _, sp := range st.Steps {
			if !sp.Agent.IsZero() {
				return true
			}
		}
	}
	for _, p := range plans {
		if !p.Agent.IsZero() {
			return true
		}
		for _, s := range p.Steps {
			if !s.Spec.Agent.IsZero() {
				return true
			}
		}
	}
	return false
}
