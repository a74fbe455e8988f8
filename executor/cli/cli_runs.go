package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
)

// The run commands: start, runs, close.

func newStartCmd(g *globals, stdout io.Writer) *cobra.Command {
	var (
		name       string
		params     []string
		paramsFile string
		budget     string
		asJSON     bool
		from       string
	)
	cmd := &cobra.Command{
		Use:   "start PLAN [DIR]",
		Short: "Start a run of PLAN beside the workspace's other runs",
		Long: `start writes a new run of PLAN into DIR (default .): its own state file,
DIR/state.NAME.json, in the original format, beside state.json and the other runs, with
its logs, reports and journal under DIR/.stepseq/runs/NAME/. The sidecar drives every
run of its workspace; without one, stepseq check state.NAME.json (or the original's
check script) does. NAME is --run, else the plan's name made unique (NAME-2, NAME-3…);
--run main starts the plan into state.json, as apply does. PLAN is a file, or the name
of a plan in DIR/plans. --from state.NAME.json, instead of PLAN, starts a copy of
another run's state (a backup, listed by stepseq runs as a copy, never driven) as a
run of its own.
` + exitCodesHelp,
		Example: `  stepseq start plans/review.yaml --param ticket=T-12
  stepseq start review --run review-t12 --params t12.yaml
  stepseq start review --budget usd=5,tries=30
  stepseq runs`,
		Args: cobra.RangeArgs(0, 2),
		RunE: func(_ *cobra.Command, args []string) error {
			if from != "" {
				return startFrom(stdout, from, args, asJSON)
			}
			if len(args) == 0 {
				return usageErr("start needs a PLAN (or --from STATE)")
			}
			dir := "."
			if len(args) > 1 {
				dir = args[1]
			}
			if name != "" {
				if err := store.ValidRunName(name); err != nil {
					return usageErr("--run: %v", err)
				}
			}
			if err := requireFolders(dir); err != nil {
				return err
			}
			given, err := readParams(paramsFile, params)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			path := planPath(dir, args[0])
			pf := engine.ReadPlanFile(path, workspaceRel(dir, path))
			if pf.Plan == nil {
				printPlanErrors(g.stderr, path, pf)
				return &exitError{code: 1, err: fmt.Errorf("%s is not a valid plan: no run started", path)}
			}
			rt, err := engine.NewRuntime(store.RunStatePath(dir, ""), g.logger())
			if err != nil {
				return err
			}
			defer rt.Close()
			runBudget, err := budgetFlag(budget)
			if err != nil {
				return err
			}
			info, err := rt.StartRun(engine.RunStart{Plan: pf, Params: given, Name: name, From: engine.FromWorkspace, Budget: runBudget})
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			if asJSON {
				return writeJSON(stdout, info)
			}
			_, err = fmt.Fprintf(stdout, "started run %s: plan %s, %s, in %s\n", info.Name, info.Plan, plural(info.Steps, "step"), info.State)
			return err
		},
	}
	cmd.Flags().StringVar(&name, "run", "", "the run's name (default the plan's name, made unique)")
	cmd.Flags().StringArrayVar(&params, "param", nil, "give the plan's param NAME the value VALUE, read as YAML (NAME=VALUE; repeatable)")
	cmd.Flags().StringVar(&paramsFile, "params", "", "read the plan's params from FILE, a JSON or YAML mapping (--param wins)")
	cmd.Flags().StringVar(&budget, "budget", "", budgetFlagHelp)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the run as a JSON object")
	cmd.Flags().StringVar(&from, "from", "", "start the copy state.NAME.json (another run's backup) as the run NAME of its own")
	return cmd
}

// startFrom is start --from: a copy of another run's state made a run of its own.
func startFrom(stdout io.Writer, from string, args []string, asJSON bool) error {
	if len(args) > 0 {
		return usageErr("start --from takes no PLAN: the state file is the run")
	}
	info, err := engine.AdoptRun(from)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	if asJSON {
		return writeJSON(stdout, info)
	}
	_, err = fmt.Fprintf(stdout, "started run %s from %s: %d/%d steps done\n", info.Name, info.State, info.Done, info.Steps)
	return err
}

// planPath is the plan file arg names: a file as given, else the plan of that
// name in DIR/plans (NAME.yaml, NAME.plan.yaml or NAME.yml).
func planPath(dir, arg string) string {
	if isFile(arg) || strings.ContainsRune(arg, filepath.Separator) || filepath.Ext(arg) != "" {
		return arg
	}
	for _, ext := range []string{".yaml", ".plan.yaml", ".yml"} {
		if p := filepath.Join(dir, "plans", arg+ext); isFile(p) {
			return p
		}
	}
	return arg
}

// workspaceRel is path relative to the workspace dir when it lies inside it, as
// a run's state records its plan's source; else path as given.
func workspaceRel(dir, path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return path
	}
	if rel, err := filepath.Rel(absDir, abs); err == nil && filepath.IsLocal(rel) {
		return filepath.ToSlash(rel)
	}
	return path
}

func newRunsCmd(stdout io.Writer) *cobra.Command {
	var (
		asJSON bool
		status []string
	)
	cmd := &cobra.Command{
		Use:   "runs [DIR]",
		Short: "List the workspace's runs: active, blocked, done and closed",
		Long: `runs lists every run of DIR (default .): state.json (the run named main) and each
state.NAME.json beside it, then the closed runs retention keeps, each with its plan,
status (active, blocked, done, closed, or invalid for a state file that does not
parse), progress and params. It changes nothing.

Exit status: 0, also when there is no run; 2 on a usage error.`,
		Example: `  stepseq runs
  stepseq runs --status active --status blocked
  stepseq runs ./workspace --json | jq '.[].name'`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: dirCompletion,
		RunE: func(_ *cobra.Command, args []string) error {
			dir := "."
			if len(args) > 0 {
				dir = args[0]
			}
			for _, s := range status {
				if !slices.Contains(store.RunStatuses, s) {
					return usageErr("--status %q: want one of %s", s, strings.Join(store.RunStatuses, ", "))
				}
			}
			if err := requireFolders(dir); err != nil {
				return err
			}
			ws, err := store.NewWorkspace(store.RunStatePath(dir, ""))
			if err != nil {
				return err
			}
			runs, err := store.ListRuns(ws)
			if err != nil {
				return err
			}
			if len(status) > 0 {
				runs = slices.DeleteFunc(runs, func(r store.RunInfo) bool { return !slices.Contains(status, r.Status) })
			}
			if asJSON {
				return writeJSON(stdout, runs)
			}
			if len(runs) == 0 {
				_, err := fmt.Fprintf(stdout, "no runs in %s: start one with stepseq start PLAN\n", dir)
				return err
			}
			var b bytes.Buffer
			writeRunsTable(&b, runs)
			_, err = stdout.Write(b.Bytes())
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	cmd.Flags().StringArrayVar(&status, "status", nil, "list only runs of this status (repeatable)")
	return cmd
}

// writeRunsTable writes the runs as a table: name, plan, status, progress,
// params, updated.
func writeRunsTable(b *bytes.Buffer, runs []store.RunInfo) {
	rows := [][]string{{"RUN", "PLAN", "STATUS", "DONE", "AT", "PARAMS", "SPENT", "UPDATED"}}
	for _, r := range runs {
		status, at, updated := r.Status, r.Current, "-"
		if r.Error != "" {
			status = r.Status + ": " + clip(r.Error, 60)
		}
		if len(r.InFlight) > 0 {
			at = clip(strings.Join(r.InFlight, ","), 40) // steps side by side: each in progress
		}
		if at == "" {
			at = "-"
		}
		switch r.Awaiting {
		case "":
		case "plan":
			at += " (the plan awaits approval)"
		default:
			at += " (awaiting approval)"
		}
		if t, err := time.Parse(time.RFC3339, r.Updated); err == nil {
			updated = t.Local().Format("2006-01-02 15:04:05")
		}
		if r.CopyOf != "" {
			status = "copy of " + r.CopyOf
		}
		rows = append(rows, []string{r.Name, orDash(r.Plan), status, fmt.Sprintf("%d/%d", r.Done, r.Steps), at, paramsText(r.Params), spentText(r), updated})
	}
	writeTable(b, rows, -1, false)
	for _, r := range runs {
		if r.Hint != "" {
			fmt.Fprintf(b, "\n%s: %s\n", r.State, r.Hint)
		}
	}
	writeWorkspaceSpend(b, runs)
}

// paramsText shows a run's params as name=value, values as JSON.
func paramsText(params map[string]any) string {
	if len(params) == 0 {
		return "-"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(params)) {
		v, _ := json.Marshal(params[k])
		parts = append(parts, k+"="+string(v))
	}
	return clip(strings.Join(parts, " "), 60)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newCloseCmd(stdout io.Writer) *cobra.Command {
	var (
		grace  time.Duration
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "close RUN [DIR]",
		Short: "Close a run: stop its agent and archive it",
		Long: `close stops the agent of the run RUN in DIR (default .) as SIGTERM stops the
sidecar's (SIGTERM to its process group, SIGKILL after --grace) and archives the run:
state.RUN.json moves to DIR/.stepseq/runs/RUN/closed.json, listed by stepseq runs as
closed until retention prunes it. Closing main archives state.json to the history, as
a new plan replacing it does. A live sidecar does the closing; close waits for it.
` + exitCodesHelp,
		Example: `  stepseq close review-t12
  stepseq runs --status closed`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) > 1 {
				dir = args[1]
			}
			if err := store.ValidRunName(args[0]); err != nil {
				return usageErr("%v", err)
			}
			if err := requireFolders(dir); err != nil {
				return err
			}
			ws, err := store.NewWorkspace(store.RunStatePath(dir, ""))
			if err != nil {
				return err
			}
			info, err := engine.Commands{WS: ws, Grace: grace}.Close(cmd.Context(), args[0])
			switch {
			case errors.Is(err, store.ErrNoRun), errors.Is(err, store.ErrRunClosed), errors.Is(err, store.ErrRunBusy):
				return &exitError{code: 1, err: err}
			case err != nil:
				return err
			}
			if asJSON {
				return writeJSON(stdout, info)
			}
			_, err = fmt.Fprintf(stdout, "closed run %s (%s)\n", info.Name, info.State)
			return err
		},
	}
	cmd.Flags().DurationVar(&grace, "grace", proc.DefaultGrace, "time between SIGTERM and SIGKILL for the run's agent")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the closed run as a JSON object")
	return cmd
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}
