package mcp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/store"
	planpkg "github.com/stepseq/stepseq/planspec/plan"
)

// Runs through MCP: run_start, run_list and run_close, and the
// run a tool acts on. The workspace's own run (state.json, "main") goes to the
// server's Engine; any other run through its files (state.NAME.json, its
// reports and triggers under .stepseq/runs/NAME/), which the sidecar that
// drives it judges, in this process or another. A run's tokens are signed with
// a key of its own, derived from the workspace's, and name the run: a token is
// good for one run's try only, and step_report finds its run in it.

// runView is the run a call acts on.
type runView struct {
	name string // "" for the workspace's own run
	rt   *engine.Runtime
	eng  Engine
	own  bool // rt is this call's: close it
}

func (v *runView) close() {
	if v.own {
		v.rt.Close()
	}
}

// runOf is the run named name ("" or main: the workspace's own): not_found when
// it has no state file, closed when it was closed.
func (t *tools) runOf(name string) (*runView, error) {
	if name == "" || name == store.MainRun {
		return &runView{rt: t.opt.Runtime, eng: t.opt.Engine}, nil
	}
	if err := store.ValidRunName(name); err != nil {
		return nil, err
	}
	main := t.opt.Runtime
	ws := main.WS.ForRun(name)
	if _, err := os.Lstat(ws.State); err != nil {
		if _, cerr := os.Lstat(ws.ClosedPath()); cerr == nil {
			return nil, store.ClosedRun(name)
		}
		return nil, fmt.Errorf("%w: %s (no %s; run_list lists the runs)", store.ErrNoRun, name, filepath.Base(ws.State))
	}
	rt, err := engine.NewRuntime(ws.State, main.Logger)
	if err != nil {
		return nil, err
	}
	rt.Getenv, rt.Allow, rt.ExposeEnv, rt.Sandbox = main.Getenv, main.Allow, main.ExposeEnv, main.Sandbox
	eng, err := t.runEngine(ws)
	if err != nil {
		rt.Close()
		return nil, err
	}
	return &runView{name: name, rt: rt, eng: eng, own: true}, nil
}

// runEngine is run ws's files engine, kept for the server's life: it holds
// which worker took which try.
func (t *tools) runEngine(ws store.Workspace) (Engine, error) {
	t.runsMu.Lock()
	defer t.runsMu.Unlock()
	if e := t.runs[ws.Run]; e != nil {
		return e, nil
	}
	key, err := engine.PullKey(ws)
	if err != nil {
		return nil, err
	}
	e := newFilesEngine(ws, engine.RunPullKey(key, ws.Run))
	if t.runs == nil {
		t.runs = map[string]Engine{}
	}
	t.runs[ws.Run] = e
	return e, nil
}

// runToken is a token of run name's try: the run, then the engine's token. The
// workspace's own run's tokens are the engine's, as before runs.
func runToken(name, token string) string {
	if name == "" {
		return token
	}
	return name + ":" + token
}

// tokenRun splits a token into its run ("" for the workspace's own) and the
// engine's token.
func tokenRun(token string) (string, string) {
	if run, rest, ok := strings.Cut(token, ":"); ok {
		return run, rest
	}
	return "", token
}

// RunInput names a run.
type RunInput struct {
	Run string `json:"run,omitempty" jsonschema:"the run (run_list names them); default the workspace's own, state.json"`
}

// RunStartInput asks for a run.
type RunStartInput struct {
	Plan   string         `json:"plan" jsonschema:"a plan's name in plans/ (plan_list lists them), or a plan as YAML"`
	Params map[string]any `json:"params,omitempty" jsonschema:"the run's params, as plan_list's params schema says; the plan's defaults fill in the rest"`
	Run    string         `json:"run,omitempty" jsonschema:"the run's name: ASCII letters, digits, - and _; default the plan's name, made unique; main starts it in state.json"`
	Budget *BudgetInput   `json:"budget,omitempty" jsonschema:"what the run may spend, in place of the plan's budget bound by bound; before a try, a bound reached holds the run until budget raises it"`
}

// RunOutput is one run.
type RunOutput struct {
	Run store.RunInfo `json:"run"`
}

// RunListInput filters runs.
type RunListInput struct {
	Filter string `json:"filter,omitempty" jsonschema:"active, blocked, done, closed or invalid: the runs of that status; other text: the runs whose name or plan holds it"`
}

// RunListOutput lists runs.
type RunListOutput struct {
	Runs []store.RunInfo `json:"runs" jsonschema:"the workspace's own run (main) first, then by name, then the closed ones"`
}

// runStart starts a run of a plan from plans/ or given as YAML. A plan that
// arrives over HTTP, named or given, may name only what the allow rule allows.
func (t *tools) runStart(_ context.Context, _ *sdk.CallToolRequest, in RunStartInput) (*sdk.CallToolResult, RunOutput, error) {
	pf, err := t.planFor(in.Plan)
	if err != nil {
		return nil, RunOutput{}, err
	}
	if pf.Plan == nil {
		return nil, RunOutput{}, refuse(InvalidPlan, engine.ErrorLines(pf.Err)...)
	}
	if r := t.admit(pf.Plan, pf.Source); r != nil {
		return nil, RunOutput{}, r
	}
	// A run a face starts is the face's, whoever wrote its plan: the face
	// chooses its params and sees which step runs next.
	pf.Face = Face
	from := engine.FromWorkspace
	if t.opt.Remote {
		from = engine.FromHTTP
	}
	main := t.opt.Runtime
	rt := &engine.Runtime{WS: main.WS, Getenv: main.Getenv, Allow: main.Allow, ExposeEnv: main.ExposeEnv, Logger: main.Logger, Now: main.Now,
		Journal: &store.Journal{Path: main.WS.JournalPath()}}
	defer rt.Journal.Close()
	budget, err := in.Budget.budget()
	if err != nil {
		return nil, RunOutput{}, err
	}
	info, err := rt.StartRun(engine.RunStart{Plan: pf, Params: in.Params, Name: in.Run, From: from, Budget: budget})
	if err != nil {
		return nil, RunOutput{}, err
	}
	if err := t.arm(); err != nil {
		return nil, RunOutput{}, err
	}
	return nil, RunOutput{Run: info}, nil
}

// planFor reads the plan run_start names: YAML when it holds a line break or
// a "steps:" key, else a plan of plans/ by its file's name or its name:.
func (t *tools) planFor(plan string) (core.PlanFile, error) {
	if strings.Contains(plan, "\n") || strings.Contains(plan, "steps:") {
		// As plan_validate reads it: a plan without a name: is named plan.
		p, v := validate(plan)
		if p == nil {
			return core.PlanFile{}, refuse(InvalidPlan, v.Errors...)
		}
		return core.PlanFile{Source: "run_start", Name: p.Name, Hash: planpkg.Hash([]byte(plan)), Plan: p}, nil
	}
	name := strings.TrimPrefix(plan, "plans/")
	for _, ext := range []string{".plan.yaml", ".plan.yml", ".yaml", ".yml"} {
		name = strings.TrimSuffix(name, ext)
	}
	listed, err := engine.ListPlans(t.opt.Runtime.WS, t.opt.plansDir(), nil)
	if err != nil {
		return core.PlanFile{}, err
	}
	var names []string
	for _, l := range listed {
		names = append(names, l.Name)
		if l.Name != name && planpkg.PlanName(l.File) != name {
			continue
		}
		if !filepath.IsLocal(filepath.FromSlash(l.File)) {
			return engine.ReadPlanFile(filepath.Join(t.opt.plansDir(), filepath.Base(l.File)), l.File), nil
		}
		root, err := os.OpenRoot(t.opt.Runtime.WS.Dir)
		if err != nil {
			return core.PlanFile{}, err
		}
		defer root.Close()
		return engine.ReadPlanFileIn(root, l.File), nil
	}
	have := "plans/ holds none"
	if len(names) > 0 {
		have = "plans/ holds " + strings.Join(names, ", ")
	}
	return core.PlanFile{}, refuse(NotFound, fmt.Sprintf("no plan %q in plans/ (%s); give a plan's name, or the plan as YAML", plan, have))
}

func (t *tools) runList(_ context.Context, _ *sdk.CallToolRequest, in RunListInput) (*sdk.CallToolResult, RunListOutput, error) {
	runs, err := store.ListRuns(t.opt.Runtime.WS)
	if err != nil {
		return nil, RunListOutput{}, err
	}
	out := RunListOutput{Runs: []store.RunInfo{}}
	for _, r := range runs {
		f := in.Filter
		switch {
		case f == "",
			slices.Contains(store.RunStatuses, f) && r.Status == f,
			!slices.Contains(store.RunStatuses, f) && (strings.Contains(r.Name, f) || strings.Contains(r.Plan, f)):
			out.Runs = append(out.Runs, r)
		}
	}
	return nil, out, nil
}

// RunCloseInput names the run to close.
type RunCloseInput struct {
	Run string `json:"run" jsonschema:"the run to close; main closes the workspace's own (state.json goes to the history)"`
}

func (t *tools) runClose(ctx context.Context, _ *sdk.CallToolRequest, in RunCloseInput) (*sdk.CallToolResult, RunOutput, error) {
	info, err := engine.Commands{WS: t.opt.Runtime.WS, RT: t.opt.Runtime}.Close(ctx, in.Run)
	if err != nil {
		return nil, RunOutput{}, err
	}
	t.runsMu.Lock()
	delete(t.runs, in.Run)
	t.runsMu.Unlock()
	return nil, RunOutput{Run: info}, nil
}
