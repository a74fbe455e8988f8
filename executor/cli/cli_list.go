package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/store"
)

func newListCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		ws     workspaceFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list [DIR]",
		Short: "List the plans in DIR/plans: active, queued, rejected (with errors) and finished",
		Long: `list shows every plan file in DIR/plans (default .) with what the sidecar made of it,
as recorded under DIR/.stepseq/plans/:

  active    the plan in DIR/state.json, running
  queued    valid, waiting for the active plan to finish
  rejected  not valid; every error is listed, as file:line:col: message
  finished  ran to DONE
  new       not seen by a sidecar yet (valid; an invalid one shows as rejected)

--json gives the same words in "status".

Exit status: 0, also when some plans are rejected; 2 on a usage error. stepseq
validate exits 1 on a rejected plan, for scripts.`,
		Example: `  stepseq list
  stepseq list ./workspace --json | jq '.[] | select(.status == "rejected")'`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: dirCompletion,
		RunE: func(_ *cobra.Command, args []string) error {
			dir, state := ws.statePath(args)
			wsp, err := store.NewWorkspace(state)
			if err != nil {
				return err
			}
			st, _ := (&store.StateFile{Path: state}).Read()
			plans, err := engine.ListPlans(wsp, filepath.Join(dir, "plans"), st)
			if err != nil {
				return err
			}
			stray := engine.StrayPlans(wsp, filepath.Join(dir, "plans"))
			for _, s := range stray {
				fmt.Fprintf(stderr, "stepseq: %s is not read: %s\n", s.Path, s.Fix)
			}
			if asJSON {
				if plans == nil {
					plans = []engine.PlanListing{}
				}
				return writeJSON(stdout, plans)
			}
			if len(plans) == 0 {
				_, err := fmt.Fprintf(stdout, "no plans in %s: write one there (stepseq init makes an example)\n", filepath.Join(dir, "plans"))
				return err
			}
			rows := [][]string{{"PLAN", "FILE", "STATUS", "ERRORS"}}
			for _, p := range plans {
				errs := "-"
				if p.ErrorCount > 0 {
					errs = fmt.Sprint(p.ErrorCount)
				}
				rows = append(rows, []string{p.Name, p.File, p.Status, errs})
			}
			var b bytes.Buffer
			writeTable(&b, rows, -1, false)
			for _, p := range plans {
				if len(p.Errors) == 0 {
					continue
				}
				fmt.Fprintf(&b, "\n%s was rejected:\n", p.File)
				for _, e := range p.Errors {
					fmt.Fprintf(&b, "  %s\n", e)
				}
			}
			_, err = stdout.Write(b.Bytes())
			return err
		},
	}
	cmd.Flags().StringVar(&ws.state, "state", "", "state file (default DIR/state.json)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	return cmd
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
