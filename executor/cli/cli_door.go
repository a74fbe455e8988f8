package cli

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/listener"
)

// doorFlags are who may act through a long-running face: the
// listener's token and whether it may go without one beyond loopback, and the
// agents any plan may run.
type doorFlags struct {
	tokenFile string
	insecure  bool
	allow     []string
	expose    []string // --expose-env: what a face's plan may read with env()
	listener  bool     // the command has --listen (watch), not only --allow-agent (mcp)
	binder    listener.Binder
	sandbox   sandboxFlags
}

func (f *doorFlags) register(cmd *cobra.Command) {
	f.listener = true
	cmd.Flags().StringVar(&f.tokenFile, "token-file", "", "the token /mcp, the page and /events want as Authorization: Bearer (default STEPSEQ_TOKEN); needed with --listen beyond loopback")
	cmd.Flags().BoolVar(&f.insecure, "insecure-listen", false, "serve --listen beyond loopback without a token: anyone who reaches it may run programs (logged at every start)")
	f.registerAllow(cmd)
}

func (f *doorFlags) registerAllow(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&f.allow, "allow-agent", nil, "the only agents any plan may run: mcp, a preset name, or a program (with leading arguments); repeatable. Over HTTP, a plan may otherwise name only mcp or a preset")
	f.sandbox.register(cmd)
	cmd.Flags().StringArrayVar(&f.expose, "expose-env", nil, "a variable whose value env() may read in a plan that arrives through MCP (plan_submit, run_start); repeatable. Without it such a plan reads no environment; plans in the workspace read all of it")
}

// apply reads the token (for a listener), binds the listener, and sets the
// runtime's allow list. The listener's name is resolved first and the address
// bound is what is judged: beyond loopback it needs a token. Every refusal is
// a configuration error: exit 2, saying how to fix it. (No program stepseq
// starts inherits the token: see proc.InheritedEnv.)
func (f *doorFlags) apply(ctx context.Context, rt *engine.Runtime, listen string, log *slog.Logger) (token string, ln net.Listener, err error) {
	allow, err := engine.ParseAllowList(f.allow, rt.WS.Dir)
	if err != nil {
		return "", nil, usageErr("%v", err)
	}
	rt.Allow = allow
	if allow != nil {
		log.Info("agents bounded by --allow-agent: no plan from any source runs another", "allow", allow.Describe())
	}
	if err := f.applyExpose(rt, log); err != nil {
		return "", nil, err
	}
	f.sandbox.apply(rt, log)
	if !f.listener || listen == "" {
		return "", nil, nil
	}
	if token, err = listener.ReadToken(f.tokenFile, rt.Getenv("STEPSEQ_TOKEN")); err != nil {
		return "", nil, usageErr("%v", err)
	}
	ln, err = f.binder.Bind(ctx, listen, func(a net.Addr) error { return listener.CheckExposure(listen, a, token, f.insecure) })
	if err != nil {
		return "", nil, usageErr("%v", err)
	}
	if token == "" && !listener.Loopback(ln.Addr()) {
		log.Warn("--insecure-listen: serving beyond loopback without a token; anyone who reaches "+ln.Addr().String()+" may hand stepseq a plan and read the page", "listen", listen, "addr", ln.Addr().String())
	}
	return token, ln, nil
}

// applyExpose sets the names of the environment a face's plan may read, and
// says which in the log and the journal (the names, never their values).
func (f *doorFlags) applyExpose(rt *engine.Runtime, log *slog.Logger) error {
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
