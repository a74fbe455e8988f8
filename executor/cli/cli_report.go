package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

func newReportCmd(stdout io.Writer) *cobra.Command {
	var r reportCall
	cmd := &cobra.Command{
		Use:   "report STATUS --summary … --evidence … --risk … --next …",
		Short: "A worker's report for its step: accepted, milestone, blocked or done",
		Long: `report is how an agent tells stepseq where its step stands (the OpenClaw
workflow protocol). STATUS is accepted (the work has begun), milestone (progress),
blocked (it cannot go on without someone) or done (finished, with the evidence).
Every field is required; risk starts with none, low, medium or high.

It reads the step, the try and the workspace from the agent's environment
(STEPSEQ_STEP, STEPSEQ_TRY, STEPSEQ_WORKSPACE), drops the report in
.stepseq/reports/<step>/ and waits for stepseq's verdict: exit 0 when it is
accepted, 1 with every reason when it is refused (a missing field, a bad risk, a
stale try, or a move the step's phase does not allow: accepted comes first, done
needs its evidence and artifacts).
` + exitCodesHelp,
		Example: `  stepseq report accepted --summary "Writing the summary" --evidence "read sources.md" --risk "low — notes only" --next "draft study/summary.md"
  stepseq report done --summary "Summary written" --evidence "study/summary.md, 1,200 words" --risk none --next none --artifact study/summary.md
  stepseq report blocked --summary "No API key" --evidence "401 from the API" --risk "high — cannot go on" --next "put a key in .env, then stepseq retry research"`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: cobra.FixedCompletions(planspec.ReportStatuses(), cobra.ShellCompDirectiveNoFileComp),
		RunE: func(cmd *cobra.Command, args []string) error {
			r.rep.Status = args[0]
			r.runGiven = cmd.Flags().Changed("run")
			if err := r.resolve(); err != nil {
				return err
			}
			return r.submit(cmd.Context(), stdout)
		},
	}
	f := cmd.Flags()
	f.StringVar(&r.rep.Summary, "summary", "", "one sentence")
	f.StringVar(&r.rep.Evidence, "evidence", "", "the first action, an artifact, the specific error, or the final artifact")
	f.StringVar(&r.rep.Risk, "risk", "", "none, low, medium or high, then the reason")
	f.StringVar(&r.rep.Next, "next", "", `what comes next ("none" when done)`)
	f.StringArrayVar(&r.rep.Artifacts, "artifact", nil, "a workspace path the report names (repeat for more); done checks they exist")
	f.StringVar(&r.result, "result", "", "the step's result as JSON")
	f.Int64Var(&r.tokensIn, "tokens-in", -1, "the input tokens the try spent, for its usage")
	f.Int64Var(&r.tokensOut, "tokens-out", -1, "the output tokens the try spent")
	f.Float64Var(&r.cost, "cost", -1, "what the try cost, in USD")
	f.StringVar(&r.model, "model", "", "the model the try ran on")
	f.StringVar(&r.step, "step", "", "the step (default $STEPSEQ_STEP)")
	f.IntVar(&r.try, "try", 0, "the try (default $STEPSEQ_TRY)")
	f.StringVar(&r.dir, "dir", "", "the workspace (default $STEPSEQ_WORKSPACE, else .)")
	f.StringVar(&r.run, "run", "", "the run (default $STEPSEQ_RUN, else main: state.json)")
	f.DurationVar(&r.wait, "wait", 10*time.Second, "how long to wait for the verdict")
	return cmd
}

// reportCall is one `stepseq report`: the report and where it goes.
type reportCall struct {
	rep    planspec.WorkerReport
	result string
	// tokensIn, tokensOut and cost are the try's usage; -1: not given.
	tokensIn, tokensOut int64
	cost                float64
	model               string
	step, dir, run      string
	runGiven            bool // --run was given
	try                 int
	wait                time.Duration
	state               string // resolved: the run's state file
}

// resolve completes the call from the agent's environment (STEPSEQ_STEP,
// STEPSEQ_TRY, STEPSEQ_RUN, STEPSEQ_STATE, STEPSEQ_WORKSPACE) where no flag
// says, and refuses what cannot be a report's.
func (r *reportCall) resolve() error {
	if r.result != "" {
		if !json.Valid([]byte(r.result)) {
			return usageErr("--result: not valid JSON: give a JSON value, like '{\"words\": 1200}'")
		}
		r.rep.Result = json.RawMessage(r.result)
	}
	if err := r.usage(); err != nil {
		return err
	}
	if r.step == "" {
		r.step = os.Getenv("STEPSEQ_STEP")
	}
	if r.step == "" {
		return usageErr("which step? run it from the agent stepseq started (STEPSEQ_STEP is set there), or give --step")
	}
	if r.try == 0 {
		if v := os.Getenv("STEPSEQ_TRY"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return usageErr("STEPSEQ_TRY=%q: want the try number stepseq set", v)
			}
			r.try = n
		}
	}
	if r.run == "" {
		r.run = os.Getenv("STEPSEQ_RUN")
	}
	if r.run != "" {
		if err := store.ValidRunName(r.run); err != nil {
			return usageErr("--run: %v", err)
		}
	}
	r.state = os.Getenv("STEPSEQ_STATE")
	if r.dir != "" || r.state == "" || r.runGiven {
		dir := r.dir
		if dir == "" {
			dir = os.Getenv("STEPSEQ_WORKSPACE")
		}
		if dir == "" {
			dir = "."
		}
		r.state = store.RunStatePath(dir, r.run)
	}
	return nil
}

// submit hands the report over and says the verdict: exit 1 when refused.
func (r *reportCall) submit(ctx context.Context, stdout io.Writer) error {
	ws, err := store.NewWorkspace(r.state)
	if err != nil {
		return err
	}
	err = engine.Commands{WS: ws}.Report(ctx, r.step, r.try, r.rep, "report", r.wait)
	switch {
	case errors.Is(err, engine.ErrReportRefused):
		return &exitError{code: 1, err: err}
	case errors.Is(err, engine.ErrNoVerdict):
		_, err = fmt.Fprintf(stdout, "%s: %v\n", r.rep.Status, err)
		return err
	case err != nil:
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s report taken for step %s\n", r.rep.Status, r.step)
	return err
}

func newRetryCmd(g *globals, stdout io.Writer) *cobra.Command {
	return queueCmd(g, stdout, &cobra.Command{
		Use:   "retry STEP [DIR]",
		Short: "A new try for a blocked or failed step",
		Long: `retry gives STEP a new try: a step a worker reported blocked, one a report
timer blocked, or one that failed or ran out of tries (one more is granted). The
new try's prompt is the troubleshoot prompt, carrying the blocker and its next.
A live sidecar starts it at once; without one, the state is reset now and the next
stepseq check runs it. A step that is neither blocked nor failed is refused.
` + exitCodesHelp,
		Example: `  stepseq retry research
  stepseq retry deploy ./workspace`,
	}, engine.Commands.Retry, "retry", 1)
}

// usage makes the report's usage from --tokens-in, --tokens-out, --cost and
// --model: what the try spent, in the agent's own word.
func (r *reportCall) usage() error {
	if r.tokensIn < 0 && r.tokensOut < 0 && r.cost < 0 && r.model == "" {
		return nil
	}
	if r.tokensIn < -1 || r.tokensOut < -1 || r.cost < -1 {
		return usageErr("--tokens-in, --tokens-out and --cost must not be negative")
	}
	u := planspec.Usage{Model: r.model, InputTokens: max(r.tokensIn, 0), OutputTokens: max(r.tokensOut, 0)}
	if r.cost >= 0 {
		u.CostUSD = &r.cost
	}
	b, err := json.Marshal(u)
	if err != nil {
		return err
	}
	r.rep.Usage = b
	return nil
}
