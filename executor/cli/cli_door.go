package cli

import (
	"log/slog"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stepseq/stepseq/executor"
	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/listener"
)

// doorFlags are who may act through a long-running face (DESIGN §15): the
// listener's token and whether it may go without one beyond loopback, and the
// agents any plan may run.
type doorFlags struct {
	tokenFile string
	insecure  bool
	allow     []string
	expose    []string // --expose-env: what a face's plan may read with env()
	listener  bool     // the command has --listen (watch), not only --allow-agent (mcp)
}

func (f *doorFlags) register(cmd *cobra.Command) {
	f.listener = true
	cmd.Flags().StringVar(&f.tokenFile, "token-file", "", "the token /mcp, the page and /events want as Authorization: Bearer (default STEPSEQ_TOKEN); needed with --listen beyond loopback")
	cmd.Flags().BoolVar(&f.insecure, "insecure-listen", false, "serve --listen beyond loopback without a token: anyone who reaches it may run programs (logged at every start)")
	f.registerAllow(cmd)
}

func (f *doorFlags) registerAllow(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&f.allow, "allow-agent", nil, "the only agents any plan may run: mcp, a preset name, or a program (with leading arguments); repeatable. Over HTTP, a plan may otherwise name only mcp or a preset")
	cmd.Flags().StringArrayVar(&f.expose, "expose-env", nil, "a variable whose value env() may read in a plan that arrives through MCP (plan_submit, run_start); repeatable. Without it such a plan reads no environment; plans in the workspace read all of it")
}

// apply reads the token (for a listener), checks that a listener beyond
// loopback has one, keeps it from the agents' environment, and sets the
// runtime's allow list. Every refusal is a
// configuration error: exit 2, saying how to fix it.
func (f *doorFlags) apply(rt *executor.Runtime, listen string, log *slog.Logger) (token string, err error) {
	// The listener's token is not the agents' business: a launched agent that
	// could read it could act on the listener as its clients do.
	rt.Environ = slices.DeleteFunc(slices.Clone(rt.Environ), func(kv string) bool { return strings.HasPrefix(kv, "STEPSEQ_TOKEN=") })
	allow, err := executor.ParseAllowList(f.allow, rt.WS.Dir)
	if err != nil {
		return "", usageErr("%v", err)
	}
	rt.Allow = allow
	if allow != nil {
		log.Info("agents bounded by --allow-agent: no plan from any source runs another", "allow", allow.Describe())
	}
	if err := f.applyExpose(rt, log); err != nil {
		return "", err
	}
	if !f.listener || listen == "" {
		return "", nil
	}
	if token, err = listener.ReadToken(f.tokenFile, rt.Getenv("STEPSEQ_TOKEN")); err != nil {
		return "", usageErr("%v", err)
	}
	if err := listener.CheckExposure(listen, token, f.insecure); err != nil {
		return "", usageErr("%v", err)
	}
	if token == "" && !listener.Loopback(listen) {
		log.Warn("--insecure-listen: serving beyond loopback without a token; anyone who reaches "+listen+" may hand stepseq a plan and read the page", "listen", listen)
	}
	return token, nil
}

// applyExpose sets the names of the environment a face's plan may read, and
// says which in the log and the journal (the names, never their values).
func (f *doorFlags) applyExpose(rt *executor.Runtime, log *slog.Logger) error {
	for _, name := range f.expose {
		if name == "" || strings.ContainsAny(name, "= \t\n") {
			return usageErr("--expose-env %q: want the name of one environment variable, like --expose-env DEPLOY_ENV", name)
		}
	}
	rt.ExposeEnv = slices.Compact(slices.Sorted(slices.Values(f.expose)))
	if len(rt.ExposeEnv) == 0 {
		return nil
	}
	log.Info("plans that arrive through MCP may read these names with env(), and no others", "expose_env", rt.ExposeEnv)
	if err := rt.Journal.Record(core.Entry{Event: "expose-env", Reason: "plans that arrive through MCP may read these names with env()",
		Detail: map[string]any{"names": rt.ExposeEnv}}); err != nil {
		log.Warn("journal not written", "err", err)
	}
	return nil
}
