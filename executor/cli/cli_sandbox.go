package cli

import (
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/engine"
)

// sandboxFlags are --sandbox and --require-sandbox, on the commands that launch
// agents (watch, mcp, check, step).
type sandboxFlags struct{ policy core.SandboxPolicy }

func (f *sandboxFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.policy.All, "sandbox", false, "run every step's agent in a bubblewrap sandbox (Linux; apt-get install bubblewrap), with the step's or the plan's sandbox: settings when they give some")
	cmd.Flags().BoolVar(&f.policy.Require, "require-sandbox", false, "launch no agent outside a sandbox: a step neither sandbox: nor --sandbox covers, or one pulled by an MCP worker, is a configuration error")
}

// apply sets the runtime's policy and says it in the log and the journal.
func (f *sandboxFlags) apply(rt *engine.Runtime, log *slog.Logger) {
	rt.Sandbox = f.policy
	if !f.policy.All && !f.policy.Require {
		return
	}
	log.Info("agents run sandboxed", "every_step", f.policy.All, "required", f.policy.Require)
	if err := rt.Journal.Record(core.Entry{Event: "sandbox", Reason: "agents run sandboxed",
		Detail: map[string]any{"everyStep": f.policy.All, "required": f.policy.Require}}); err != nil {
		log.Warn("journal not written", "err", err)
	}
}
