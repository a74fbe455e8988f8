package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/planspec"
)

const budgetFlagHelp = "bound what the run may spend, in place of the plan's budget bound by bound: KEY=VALUE,… with keys usd, tokens, tries, wall (like usd=5,tries=30)"

// budgetFlag reads --budget; zero when it is not given.
func budgetFlag(s string) (planspec.Budget, error) {
	if s == "" {
		return planspec.Budget{}, nil
	}
	b, err := planspec.ParseBudget(s)
	if err != nil {
		return b, usageErr("--budget: %v", err)
	}
	return b, nil
}

func newBudgetCmd(g *globals, stdout io.Writer) *cobra.Command {
	var (
		ws   workspaceFlags
		step string
	)
	cmd := &cobra.Command{
		Use:   "budget CHANGE... [DIR]",
		Short: "Raise (or set) what a run may spend; a run its budget holds goes on",
		Long: `budget changes the run's budget: usd=+2 raises the usd bound by 2, tries=40 sets
the tries bound; keys usd, tokens, tries, wall (wall=+1h). A run that reached a
bound launched nothing and said so ("budget: $1.20 of $1.00 spent (usd)"): once
no bound holds it, it goes on. With no --step, the bound that holds the run is
raised: the step's own budget when it is a step's, else the run's.

A live sidecar takes the change at once; without one, the state is changed now
and the next stepseq check goes on. stepseq status shows the spend and the budget.

What a run may spend is a person's to raise: run from the environment of an agent
stepseq launched (STEPSEQ_STEP and STEPSEQ_TRY set), budget is refused (exit 1).

With --nats URL --run RUN it changes a fleet's run: a running run's worker gives
the change to its engine; a queued or blocked run keeps it in its record for the
worker that takes it next, and a run its budget blocked goes back on the queue
once no bound holds it. A run that is done or closed is refused (exit 1).
` + exitCodesHelp,
		Example: `  stepseq budget usd=+2
  stepseq budget --run review-t12 tries=+10,wall=+1h
  stepseq budget --step review usd=3 ./workspace`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			var changes, dirs []string
			for _, a := range args {
				if strings.Contains(a, "=") {
					changes = append(changes, a)
				} else {
					dirs = append(dirs, a)
				}
			}
			if len(dirs) > 1 || len(changes) == 0 {
				return usageErr("want changes like usd=+2, and at most one DIR, got %s", strings.Join(args, " "))
			}
			_, state := ws.statePath(dirs)
			rt, err := engine.NewRuntime(state, g.logger())
			if err != nil {
				return err
			}
			defer rt.Close()
			msg, err := engine.Commands{WS: rt.WS, RT: rt, Env: os.Getenv}.Budget(context.Background(), step, changes, "budget")
			switch {
			case errors.Is(err, core.ErrBudgetChange):
				return usageErr("%v", err)
			case errors.Is(err, core.ErrNoStep), errors.Is(err, engine.ErrAgentBudget):
				return &exitError{code: 1, err: err}
			case err != nil:
				return err
			}
			_, err = fmt.Fprintln(stdout, msg)
			return err
		},
	}
	cmd.Flags().StringVar(&ws.state, "state", "", "state file (default DIR/state.json)")
	cmd.Flags().StringVar(&step, "step", "", "change this step's own budget (default: the bound that holds the run)")
	ws.addRunFlag(cmd, false)
	return cmd
}
