package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/stepseq/stepseq/executor"
	"github.com/stepseq/stepseq/planspec"
)

func newValidateCmd(stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check plan files; print every error as file:line:col: message",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			bad := 0
			for _, path := range args {
				pf := executor.ReadPlanFile(path, path)
				if pf.Plan != nil {
					fmt.Fprintf(stdout, "%s: ok (%d steps)\n", path, len(pf.Plan.Steps))
					continue
				}
				bad++
				printPlanErrors(stderr, path, pf)
			}
			if bad > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d of %d plan files invalid", bad, len(args))}
			}
			return nil
		},
	}
}

func newApplyCmd(g *globals, stdout io.Writer) *cobra.Command {
	var (
		force bool
		ws    workspaceFlags
	)
	cmd := &cobra.Command{
		Use:   "apply PLAN [DIR]",
		Short: "Turn a plan into DIR/state.json without a sidecar",
		Long: "apply writes DIR/state.json (default .) in the original format from PLAN. A state whose plan " +
			"is still IN_PROGRESS is kept unless --force; a state being replaced is archived under .stepseq/history/.",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(_ *cobra.Command, args []string) error {
			dir, state := ws.statePath(args[1:])
			source := args[0]
			if abs, err := filepath.Abs(args[0]); err == nil {
				if absDir, err := filepath.Abs(dir); err == nil {
					if rel, err := filepath.Rel(absDir, abs); err == nil && filepath.IsLocal(rel) {
						source = filepath.ToSlash(rel)
					}
				}
			}
			pf := executor.ReadPlanFile(args[0], source)
			if pf.Plan == nil {
				printPlanErrors(g.stderr, args[0], pf)
				return &exitError{code: 1, err: fmt.Errorf("%s is not a valid plan; %s is untouched", args[0], state)}
			}
			rt, err := executor.NewRuntime(state, g.logger())
			if err != nil {
				return err
			}
			defer rt.Close()
			st, archived, err := rt.ApplyPlan(&executor.StateFile{Path: rt.WS.State}, pf, force)
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			if archived != "" {
				fmt.Fprintf(stdout, "archived the previous state to %s\n", archived)
			}
			fmt.Fprintf(stdout, "wrote %s: plan %s, %d steps\n", rt.WS.State, st.Settings.Name, len(st.StepQueue))
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "replace a state whose plan is still in progress (it is archived)")
	cmd.Flags().StringVar(&ws.state, "state", "", "state file (default DIR/state.json)")
	return cmd
}

func newSchemaCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of the plan format, for editors",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := stdout.Write(planspec.Schema())
			return err
		},
	}
}

func newGraphCmd(stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "graph PLAN",
		Short: "Print a Mermaid flowchart of a plan",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			pf := executor.ReadPlanFile(args[0], args[0])
			if pf.Plan == nil {
				printPlanErrors(stderr, args[0], pf)
				return &exitError{code: 1}
			}
			_, err := io.WriteString(stdout, pf.Plan.Mermaid())
			return err
		},
	}
}

// printPlanErrors writes why a plan file is not valid: every error, one per line
// as file:line:col: message, or that there is no such file.
func printPlanErrors(w io.Writer, path string, pf executor.PlanFile) {
	if errors.Is(pf.Err, fs.ErrNotExist) {
		fmt.Fprintf(w, "%s: no such file\n", path)
		return
	}
	for _, line := range executor.ErrorLines(pf.Err) {
		fmt.Fprintln(w, line)
	}
}
