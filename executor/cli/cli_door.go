package cli

import (
	"context"
	"log/slog"
	"net"

	"github.com/spf13/cobra"

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
	listener  bool // the command has --listen (watch), not only --allow-agent (mcp)
	binder    listener.Binder
}

func (f *doorFlags) register(cmd *cobra.Command) {
	f.listener = true
	cmd.Flags().StringVar(&f.tokenFile, "token-file", "", "the token /mcp, the page and /events want as Authorization: Bearer (default STEPSEQ_TOKEN); needed with --listen beyond loopback")
	cmd.Flags().BoolVar(&f.insecure, "insecure-listen", false, "serve --listen beyond loopback without a token: anyone who reaches it may run programs (logged at every start)")
	f.registerAllow(cmd)
}

func (f *doorFlags) registerAllow(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&f.allow, "allow-agent", nil, "the only agents any plan may run: mcp, a preset name, or a program (with leading arguments); repeatable. Over HTTP, a plan may otherwise name only mcp or a preset")
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
