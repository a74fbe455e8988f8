// Package cli is stepseq's command line: the commands, their flags and their
// output. main calls Main; the work lives in executor and planspec.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/notify"
	"github.com/stepseq/stepseq/planspec"
)

// version is the one Main was given: main's, set at build time with
// -ldflags "-X main.version=…".
var version = "dev"

// run builds the command tree for one invocation and executes it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}

// globals are the flags every command shares.
type globals struct {
	logFormat string
	logLevel  string
	stderr    io.Writer
}

func (g *globals) logger() *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if strings.EqualFold(g.logFormat, "json") {
		return slog.New(slog.NewJSONHandler(g.stderr, opts))
	}
	return slog.New(slog.NewTextHandler(g.stderr, opts))
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stderr: stderr}
	root := &cobra.Command{
		Use:   "stepseq",
		Short: "Drive multi-step plans for AI agents, moved by file events",
		Long: `stepseq runs a plan of steps, one AI agent launch per step, and goes on to the next
step once the step's required outputs exist and its checks pass. The plan is YAML in
DIR/plans; the run is DIR/state.json, the Agent Step Sequencer's format.

Run it as a sidecar (stepseq watch), which acts on file events and uses no CPU while
idle, or from a heartbeat (stepseq check) as the original scripts were run. stepseq
status, logs, list and history show what happened; stepseq init starts a workspace.
` + exitCodesHelp + agentEnvHelp,
		Example: `  stepseq init && stepseq validate plans/example.yaml
  STEP_AGENT_CMD='openclaw agent --message' stepseq watch .
  stepseq status -f
  stepseq logs outline`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			switch strings.ToLower(g.logFormat) {
			case "text", "json":
			default:
				return usageErr("--log-format %q: want text or json", g.logFormat)
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
				return usageErr("--log-level %q: want debug, info, warn or error", g.logLevel)
			}
			return nil
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr("%v", err) })
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", "text", "log format on stderr: text or json")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	root.AddCommand(
		newCheckCmd(g),
		newStepCmd(g),
		newWatchCmd(g),
		newTriggerCmd(g, stdout),
		newValidateCmd(stdout, stderr),
		newApplyCmd(g, stdout),
		newSchemaCmd(stdout),
		newGraphCmd(stdout, stderr),
		newVersionCmd(stdout),
		newStatusCmd(g, stdout),
		newInitCmd(g, stdout),
		newLogsCmd(stdout, stderr),
		newHistoryCmd(stdout),
		newListCmd(stdout, stderr),
		newReportCmd(stdout),
		newRetryCmd(g, stdout),
		newApproveCmd(g, stdout),
		newRejectCmd(g, stdout),
		newMCPCmd(g, stdout),
		newStartCmd(g, stdout),
		newRunsCmd(stdout),
		newCloseCmd(stdout),
		newBudgetCmd(g, stdout),
	)
	addFleet(root, g, stdout)
	_ = root.RegisterFlagCompletionFunc("log-format", cobra.FixedCompletions([]cobra.Completion{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
	_ = root.RegisterFlagCompletionFunc("log-level", cobra.FixedCompletions([]cobra.Completion{"debug", "info", "warn", "error"}, cobra.ShellCompDirectiveNoFileComp))
	// cobra's completion command, made now so that its arguments are checked too:
	// a shell it does not know is a usage error, not a help page and exit 0.
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Args = func(_ *cobra.Command, args []string) error {
				if len(args) > 0 {
					return fmt.Errorf("unknown shell %q: want bash, zsh, fish or powershell", args[0])
				}
				return nil
			}
			c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
			c.Example = "  source <(stepseq completion bash)\n  stepseq completion zsh > \"${fpath[1]}/_stepseq\""
		}
	}
	// Wrong arguments are usage errors (exit 2), as flag errors are; a typo of
	// a command gets the command it is close to.
	root.SuggestionsMinimumDistance = 2
	root.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	root.Args = func(_ *cobra.Command, args []string) error {
		if len(args) > 0 {
			if s := root.SuggestionsFor(args[0]); len(s) > 0 {
				return usageErr("unknown command %q: did you mean %s? (stepseq --help lists them all)", args[0], strings.Join(s, " or "))
			}
			return usageErr("unknown command %q: see stepseq --help", args[0])
		}
		return nil
	}
	for _, cmd := range root.Commands() {
		if check := cmd.Args; check != nil {
			cmd.Args = func(c *cobra.Command, args []string) error {
				if err := check(c, args); err != nil {
					return usageErr("%s: %v (usage: %s)", c.Name(), err, c.UseLine())
				}
				return nil
			}
		}
	}
	return root
}

func newVersionCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version",
		Long:    "version prints stepseq's version, as --version does.\n" + exitCodesHelp,
		Example: "  stepseq version",
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := io.WriteString(stdout, "stepseq "+version+"\n")
			return err
		},
	}
}

// statePathArg is the original's STATE argument: default ./state.json.
func statePathArg(args []string) string {
	if len(args) > 0 {
		return args[0]
	}
	return "state.json"
}

func newCheckCmd(g *globals) *cobra.Command {
	return newChainCmd(g, &cobra.Command{
		Use:   "check [STATE]",
		Short: "Heartbeat drop-in for step-sequencer-check.py: run the plan's chain once",
		Long: `check reads STATE (default ./state.json) as the original check script does, then
runs the whole chain of due steps in this one process until the plan is DONE, blocked,
or waiting on a gate. A live sidecar on the workspace gets the work instead. Run it
from cron or a heartbeat, as step-sequencer-check.py was.
` + checkExitHelp + agentEnvHelp,
		Example: `  stepseq check
  stepseq check ./workspace/state.json
  */5 * * * * cd /srv/ws && STEP_AGENT_CMD='openclaw agent --message' stepseq check`,
	}, (*engine.Chain).Check)
}

func newStepCmd(g *globals) *cobra.Command {
	return newChainCmd(g, &cobra.Command{
		Use:   "step [STATE]",
		Short: "Drop-in for step-sequencer-runner.py: run the current step, then go on",
		Long: `step runs the current step of STATE (default ./state.json) after the plan's
stepDelayMinutes, whatever its status, as the original runner does, and then the steps
after it that are due. A failed step exits 1.
` + exitCodesHelp + agentEnvHelp,
		Example: `  stepseq step
  STEP_MAX_RETRIES=5 stepseq step ./workspace/state.json`,
	}, (*engine.Chain).Step)
}

// newChainCmd completes check or step: both take the original's STATE argument and
// drive the chain; a failed step exits 1, as the original runner's does.
func newChainCmd(g *globals, cmd *cobra.Command, drive func(*engine.Chain, context.Context) error) *cobra.Command {
	var box sandboxFlags
	box.register(cmd)
	cmd.Args = cobra.MaximumNArgs(1)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		// A missing state file is the original's "nothing to do"; a missing
		// folder is a mistyped path, and said so.
		if err := requireFolders(filepath.Dir(statePathArg(args))); err != nil {
			return err
		}
		state := statePathArg(args)
		if _, err := os.Stat(state); errors.Is(err, fs.ErrNotExist) && g.says(slog.LevelInfo) {
			// Exit 0 and nothing written, as the original; what to do is said.
			fmt.Fprintln(g.stderr, noStateHint(state))
		}
		c, err := newChain(state, g)
		if err != nil {
			return err
		}
		defer c.Close()
		box.apply(c.Runtime, g.logger())
		err = drive(c, cmd.Context())
		if errors.Is(err, engine.ErrStepFailed) {
			return &exitError{code: 1}
		}
		return err
	}
	return cmd
}

func newChain(statePath string, g *globals) (*engine.Chain, error) {
	rt, err := engine.NewRuntime(statePath, g.logger())
	if err != nil {
		return nil, err
	}
	return &engine.Chain{Runtime: rt, OpenNotifier: func(st *planspec.State) (engine.Notifier, func()) {
		return openNotifier(rt, st)
	}}, nil
}

// openNotifier is the notifier of a check or step: the plan's sinks and the feed.
// The other runs' sinks keep their place in the outbox and what they have yet
// to deliver, for the sidecar.
// Before the command ends its sinks get notifyFlush to deliver; what is left
// goes out with the next stepseq on the workspace.
func openNotifier(rt *engine.Runtime, st *planspec.State) (engine.Notifier, func()) {
	cfg := notifyConfig(rt, notify.PlanSinks(st.Settings.Notify), nil)
	cfg.KeepUnlisted = true
	n, err := notify.New(cfg)
	if err != nil {
		rt.Logger.Error("notifications off for this run", "err", err)
		return nil, func() {}
	}
	return n, func() {
		ctx, cancel := context.WithTimeout(context.Background(), notifyFlush)
		_ = n.Flush(ctx)
		cancel()
		ctx, cancel = context.WithTimeout(context.Background(), notify.CloseWait)
		defer cancel()
		if err := n.Close(ctx); err != nil {
			rt.Logger.Warn("closing the notifier", "err", err)
		}
	}
}

// exitCodesHelp closes the help of the commands that use the documented exit codes.
const exitCodesHelp = `
Exit status: 0 success; 1 a failed step, a blocked plan or invalid input; 2 a usage
or configuration error (a bad flag, a missing folder, STEP_AGENT_CMD unset or unsafe,
a second sidecar on a workspace).
`

// checkExitHelp is check's exit status: the original check script's, which
// exits 0 once it has read the state, a failed step or a blocked plan included
// (they are in the state, for status to tell).
const checkExitHelp = `
Exit status: 0 once the state was read, as step-sequencer-check.py: a failed step and a
blocked plan exit 0 too (they are in the state: stepseq status tells them, and exits 1
on a blocked plan); no state file exits 0, writes nothing and says what makes one
(--log-level warn keeps quiet). 1 a state that cannot be read; 2 a usage or
configuration error (a bad flag, a missing folder, STEP_AGENT_CMD unset or unsafe).
`

// agentEnvHelp names the environment of the commands that launch agents or say
// what the next launch would be.
const agentEnvHelp = `
Environment:
  STEP_AGENT_CMD    the agent's command; the step's prompt is appended as its last
                    argument (or replaces {prompt}). A plan's agent: wins over it.
  STEP_MAX_RETRIES  tries of a failing step before the plan is blocked (default 3)
  NO_COLOR          no colour in status
The agent gets STEPSEQ_STEP, STEPSEQ_TRY, STEPSEQ_WORKSPACE, STEPSEQ_STATE and STEPSEQ_RUN.
`

// usageErr is a usage error: exit 2.
func usageErr(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

// codeFor maps an error to its exit code.
func codeFor(err error) int {
	switch {
	case errors.Is(err, core.ErrConfig):
		return 2
	case errors.Is(err, planspec.ErrInvalidState):
		return 1
	}
	return 1
}
