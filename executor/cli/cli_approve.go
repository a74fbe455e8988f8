package cli

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/stepseq/stepseq/executor/engine"
)

// The answers to a gate (approve: on a step, approval: on a plan): a person's
// yes or no, from their own shell.

func newApproveCmd(g *globals, stdout io.Writer) *cobra.Command {
	return answerCmd(g, stdout, true, &cobra.Command{
		Use:   "approve [STEP] [DIR]",
		Short: "Say yes to a gate: the plan or step awaiting approval starts",
		Long: `approve answers yes to the gate that waits: a plan with approval: required
before its first step, or a step with approve: true before its first try. With no
STEP it answers whichever gate waits (the request said which); with STEP, that
step's gate. The answer is journaled with who gave it (--by, default the user),
the face (cli) and when. A live sidecar starts the step at once; without one, the
next stepseq check does. A second approve of the same gate is an answer too.

A gate that does not wait is refused (exit 1), saying what the run waits for
instead; so is an unknown step or run, and an approve run from the environment of
an agent stepseq launched: an agent's own gate is not its to open.
` + exitCodesHelp,
		Example: `  stepseq approve
  stepseq approve deploy --note "backup checked"
  stepseq approve --run review-t12`,
	})
}

func newRejectCmd(g *globals, stdout io.Writer) *cobra.Command {
	return answerCmd(g, stdout, false, &cobra.Command{
		Use:   "reject [STEP] [DIR] --note TEXT",
		Short: "Say no to a gate: the plan or step awaiting approval is blocked with the note",
		Long: `reject answers no to the gate that waits (or STEP's): the step is blocked
with the note as its blocker, and the plan holds there; stepseq retry STEP asks
again. The note is required. The answer is journaled with who gave it, the face
(cli) and when. A gate that does not wait, an unknown step or run, and a reject run
from the environment of an agent stepseq launched are refused (exit 1).
` + exitCodesHelp,
		Example: `  stepseq reject --note "not before the backup"
  stepseq reject deploy --run release-7 --note "wrong branch"`,
	})
}

// answerCmd completes approve or reject: the arguments, --note, --by, --run,
// --state, --json, and the engine's one method for the answer.
func answerCmd(g *globals, stdout io.Writer, approve bool, cmd *cobra.Command) *cobra.Command {
	var (
		ws     workspaceFlags
		a      engine.GateAnswer
		asJSON bool
	)
	cmd.Args = cobra.RangeArgs(0, 2)
	cmd.ValidArgsFunction = stepCompletion(&ws)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			a.Step = args[0]
		}
		_, state := ws.statePath(args[min(len(args), 1):])
		rt, err := engine.NewRuntime(state, g.logger())
		if err != nil {
			return err
		}
		defer rt.Close()
		a.Face, a.Env = "cli", os.Getenv
		cmds := engine.Commands{WS: rt.WS, RT: rt}
		answer := cmds.Approve
		if !approve {
			answer = cmds.Reject
		}
		got, err := answer(cmd.Context(), a)
		switch {
		case errors.Is(err, engine.ErrNoNote):
			return usageErr("%v", err)
		case err != nil:
			return &exitError{code: 1, err: err}
		case asJSON:
			return writeJSON(stdout, got)
		}
		_, err = fmt.Fprintln(stdout, got.Message)
		return err
	}
	f := cmd.Flags()
	f.StringVar(&a.Note, "note", "", "why: kept with the answer; a reject's note is the step's blocker")
	f.StringVar(&a.By, "by", "", "who answers (default $USER)")
	f.BoolVar(&asJSON, "json", false, "print the answer as a JSON object")
	f.StringVar(&ws.state, "state", "", "state file (default DIR/state.json)")
	ws.addRunFlag(cmd, false)
	return cmd
}
