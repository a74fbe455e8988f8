package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
	"github.com/stepseq/stepseq/planspec/plan"
)

func newValidateCmd(stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check plan files; print every error as file:line:col: message",
		Long: `validate parses each FILE as a plan, strictly (an unknown key is an error), and
prints every error of every file as file:line:col: message, or "ok" with the number
of steps and each loop (repeat group) with its steps and its rounds. It changes nothing.
` + exitCodesHelp,
		Example: `  stepseq validate plans/*.yaml
  stepseq validate plans/example.yaml && cp plans/example.yaml ../ws/plans/`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			bad := 0
			for _, path := range args {
				pf := engine.ReadPlanFile(path, path)
				if pf.Plan != nil {
					if err := engine.CheckWorktrees(pf.Plan.UsesWorktrees(), filepath.Dir(path)); err != nil {
						pf.Plan, pf.Err = nil, fmt.Errorf("%s: %w", path, err)
					}
				}
				if pf.Plan != nil {
					fmt.Fprintf(stdout, "%s: ok (%s)\n", path, planShape(pf.Plan))
					warnMissingAgents(stderr, path, pf.Plan)
					writeValidateSandbox(stdout, path, pf.Plan)
					for _, n := range engine.BudgetBlind(pf.Plan) {
						fmt.Fprintf(stdout, "%s: note: %s\n", path, n)
					}
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

// writeValidateSandbox says which of a valid plan's steps run sandboxed,
// which edit unattended without a sandbox (STEP_AGENT_CMD is no preset), and
// what a sandbox keeps from working.
func writeValidateSandbox(w io.Writer, path string, p *plan.Plan) {
	v := engine.SandboxNotes(p.State(path, ""), core.SandboxPolicy{}, func(string) string { return "" })
	if v.Empty() {
		return
	}
	var b bytes.Buffer
	writeSandbox(&b, path+": ", &v)
	_, _ = w.Write(b.Bytes())
}

// planShape is validate's word on a valid plan: its steps, then each loop with
// its steps and how many rounds it may run ("4 steps; loop rounds: 3 steps, up
// to params.max_rounds rounds").
func planShape(p *plan.Plan) string {
	var b strings.Builder
	b.WriteString(plural(len(p.Steps), "step"))
	for _, g := range p.Groups {
		fmt.Fprintf(&b, "; loop %s: %s, up to %s rounds", g.ID, plural(len(g.Steps), "step"), g.Max)
	}
	return b.String()
}

func newApplyCmd(g *globals, stdout io.Writer) *cobra.Command {
	var (
		force      bool
		ws         workspaceFlags
		params     []string
		paramsFile string
		budget     string
	)
	cmd := &cobra.Command{
		Use:   "apply PLAN [DIR]",
		Short: "Turn a plan into DIR/state.json (beside a live sidecar: hand it over)",
		Long: `apply writes DIR/state.json (default .) in the original format from PLAN, for a
heartbeat (stepseq check) to run, holding the workspace lock while it writes. A state
whose plan is still IN_PROGRESS is kept unless --force; a state being replaced is
archived under DIR/.stepseq/history/ (stepseq history lists them).

Beside a live sidecar (stepseq watch or mcp) apply writes nothing itself: it hands the
plan to the sidecar as DIR/plans/NAME.yaml, as any agent would, and prints the
sidecar's verdict (active, waiting for the plan that runs, or invalid: exit 1).
` + exitCodesHelp,
		Example: `  stepseq apply plans/research.yaml
  stepseq apply research.yaml ./workspace --force
  stepseq apply plans/review.yaml --param max_rounds=3 --params params.yaml
  stepseq apply plans/research.yaml --budget usd=5,tries=30`,
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
			given, err := readParams(paramsFile, params)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			pf := engine.ReadPlanFile(args[0], source)
			if pf.Plan == nil {
				printPlanErrors(g.stderr, args[0], pf)
				return &exitError{code: 1, err: fmt.Errorf("%s is not a valid plan; %s is untouched", args[0], state)}
			}
			pf.Params = given
			if pf.Budget, err = budgetFlag(budget); err != nil {
				return err
			}
			if err := requireFolders(filepath.Dir(state)); err != nil {
				return err
			}
			rt, err := engine.NewRuntime(state, g.logger())
			if err != nil {
				return err
			}
			defer rt.Close()
			done, err := rt.Apply(&store.StateFile{Path: rt.WS.State}, pf, force)
			switch {
			case errors.Is(err, engine.ErrApplyParams):
				return &exitError{code: 2, err: err}
			case err != nil:
				return &exitError{code: 1, err: err}
			case done.HandedTo != nil:
				return handedOver(stdout, done, force)
			}
			if done.Archived != "" {
				fmt.Fprintf(stdout, "archived the previous state to %s\n", done.Archived)
			}
			fmt.Fprintf(stdout, "wrote %s: plan %s, %s\n", rt.WS.State, done.State.Settings.Name, plural(len(done.State.StepQueue), "step"))
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "replace a state whose plan is still in progress (it is archived)")
	cmd.Flags().StringVar(&budget, "budget", "", budgetFlagHelp)
	cmd.Flags().StringVar(&ws.state, "state", "", "state file (default DIR/state.json)")
	cmd.Flags().StringArrayVar(&params, "param", nil, "give the plan's param NAME the value VALUE, read as YAML (NAME=VALUE; repeatable)")
	cmd.Flags().StringVar(&paramsFile, "params", "", "read the plan's params from FILE, a JSON or YAML mapping (--param wins)")
	return cmd
}

// handedOver says what the live sidecar made of the plan apply handed it.
func handedOver(stdout io.Writer, done engine.Applied, force bool) error {
	h, rec := done.HandedTo, done.Record
	fmt.Fprintf(stdout, "a live sidecar (stepseq %s %d) runs this workspace: handed it %s\n", h.Kind, h.PID, done.File)
	switch rec.Status {
	case core.PlanInvalid:
		for _, e := range rec.Errors {
			fmt.Fprintln(stdout, e)
		}
		return &exitError{code: 1, err: fmt.Errorf("the sidecar refused %s", done.File)}
	case core.PlanWaiting:
		fmt.Fprintf(stdout, "%s waits for the plan that runs to finish\n", done.File)
		if force {
			fmt.Fprintln(stdout, "--force does not stop the plan a live sidecar runs: stepseq close it, or let it finish")
		}
	default:
		fmt.Fprintf(stdout, "%s: %s\n", done.File, rec.Status)
	}
	return nil
}

// paramsCap caps a --params file: params are a few values.
var paramsCap = store.Cap{Bytes: 1 << 20, What: "a params file", Hint: "params are a few values; keep long texts in files the steps read"}

// readParams gathers the params apply is given: those of file, then each
// NAME=VALUE, its value read as YAML (3 is a number, "3" a string).
func readParams(file string, kv []string) (map[string]any, error) {
	given := map[string]any{}
	if file != "" {
		data, err := store.ReadFile(file, paramsCap)
		if err != nil {
			return nil, fmt.Errorf("--params: %w", err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("--params %s: want a JSON or YAML mapping of names to values: %v", file, err)
		}
		maps.Copy(given, m)
	}
	for _, p := range kv {
		name, value, ok := strings.Cut(p, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--param %q: want NAME=VALUE, like --param max_rounds=3", p)
		}
		var v any
		if err := yaml.Unmarshal([]byte(value), &v); err != nil {
			return nil, fmt.Errorf("--param %s: the value is read as YAML: %v (quote it for a string)", name, err)
		}
		if v == nil && strings.TrimSpace(value) == "" {
			v = ""
		}
		given[name] = v
	}
	return given, nil
}

func newSchemaCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of the plan format, for editors",
		Long: `schema prints the JSON Schema of the plan format. Editors with a YAML language
server complete and check plans that name it on their first line:
# yaml-language-server: $schema=../.stepseq/schema.json (stepseq init writes both).
` + exitCodesHelp,
		Example: `  stepseq schema > .stepseq/schema.json`,
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := stdout.Write(plan.Schema())
			return err
		},
	}
}

func newGraphCmd(stdout, stderr io.Writer) *cobra.Command {
	var state, run string
	cmd := &cobra.Command{
		Use:   "graph PLAN",
		Short: "Print a Mermaid flowchart of a plan",
		Long: `graph prints PLAN as a Mermaid flowchart: the steps in order, with their conditions,
gates and checks; a plan whose steps say what they need, with an arrow from each
step a step needs. GitHub and most Markdown viewers draw it. With --state, each
step's box is coloured by its phase in that state: planned, dispatching, running
or in_progress, blocked, reviewing, done, failed; a foreach step holds a box per
instance.
` + exitCodesHelp,
		Example: `  stepseq graph plans/example.yaml
  stepseq graph plans/example.yaml > docs/plan.mmd
  stepseq graph plans/example.yaml --state state.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			pf := engine.ReadPlanFile(args[0], args[0])
			if pf.Plan == nil {
				printPlanErrors(stderr, args[0], pf)
				return &exitError{code: 1}
			}
			if run != "" {
				if err := store.ValidRunName(run); err != nil {
					return usageErr("--run: %v", err)
				}
				if state == "" {
					state = store.RunStatePath(".", run)
				}
			}
			if state == "" {
				_, err := io.WriteString(stdout, pf.Plan.Mermaid())
				return err
			}
			st, err := (&store.StateFile{Path: state}).Read()
			if err != nil {
				return err
			}
			x := st.Index() // a foreach's instances, drawn in its box
			_, err = io.WriteString(stdout, pf.Plan.MermaidState(func(id string) string {
				if st.Steps[id] == nil {
					return ""
				}
				return core.DisplayPhase(st, id)
			}, func(id string) []string { return x.Instances[id] }))
			return err
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "colour the steps by their phase in this state file")
	cmd.Flags().StringVar(&run, "run", "", "colour the steps by their phase in this run's state (./state.RUN.json; main: ./state.json)")
	return cmd
}

// printPlanErrors writes why a plan file is not valid: every error, one per line
// as file:line:col: message, or that there is no such file.
func printPlanErrors(w io.Writer, path string, pf core.PlanFile) {
	if errors.Is(pf.Err, fs.ErrNotExist) {
		fmt.Fprintf(w, "%s: no such file\n", path)
		return
	}
	for _, line := range engine.ErrorLines(pf.Err) {
		fmt.Fprintln(w, line)
	}
}

// warnMissingAgents tells, without failing the plan, of each agent program the
// plan names by a bare name that is not on PATH here: its step could not
// launch on this machine, and nobody would be told until it was due.
func warnMissingAgents(stderr io.Writer, path string, p *plan.Plan) {
	seen := map[string]bool{}
	check := func(a planspec.AgentSpec, where string) {
		if len(a.Argv) == 0 || strings.ContainsAny(a.Argv[0], "/${") || seen[a.Argv[0]] {
			return
		}
		seen[a.Argv[0]] = true
		if _, err := exec.LookPath(a.Argv[0]); err != nil {
			fmt.Fprintf(stderr, "%s: warning: %s: agent %q is not on PATH here: its step cannot launch on this machine until it is\n", path, where, a.Argv[0])
		}
	}
	check(p.Settings.Agent, "agent")
	for _, st := range p.Steps {
		check(st.Spec.Agent, "step "+st.ID)
	}
}
