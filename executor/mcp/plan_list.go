package mcp

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/planspec"
	"github.com/stepseq/stepseq/planspec/plan"
)

// PlanListOutput is what an agent may start: the plans in plans/.
type PlanListOutput struct {
	Plans []ListedPlan `json:"plans" jsonschema:"by name; none when plans/ holds no plan"`
}

// ListedPlan is one plan file, with what starting it takes.
type ListedPlan struct {
	Name   string `json:"name" jsonschema:"the plan's name: its name:, else the file's name"`
	File   string `json:"file" jsonschema:"relative to the workspace"`
	Status string `json:"status" jsonschema:"the sidecar's verdict: new (not judged yet), active, waiting (another plan runs), finished or invalid"`
	Valid  bool   `json:"valid"`
	// Steps are the plan's steps with their titles: a plan has no title of
	// its own, its steps' say what it does.
	Steps []ListedStep `json:"steps" jsonschema:"each step's id and title, in order"`
	// Params is the JSON Schema of the params a run of it takes.
	Params map[string]any `json:"params,omitempty" jsonschema:"the JSON Schema of the params object a run takes: each param's schema, required when it has no default"`
	Errors []string       `json:"errors,omitempty" jsonschema:"why the plan is invalid, each as file:line:col: message"`
}

// ListedStep is a step's id and title.
type ListedStep struct {
	ID    string `json:"id"`
	Title string `json:"title"`
}

// planList lists plans/ as `stepseq list` does, each plan read through the
// workspace's root (a link out of it is refused), with its steps and params.
func (t *tools) planList(ctx context.Context, _ *sdk.CallToolRequest, _ Empty) (*sdk.CallToolResult, PlanListOutput, error) {
	ws := t.opt.Runtime.WS
	var st *planspec.State
	err := t.opt.Engine.View(ctx, func(s *planspec.State) {
		if s != nil {
			st = s.Clone()
		}
	})
	if err != nil {
		return nil, PlanListOutput{}, err
	}
	dir := t.opt.plansDir()
	listed, err := engine.ListPlans(ws, dir, st)
	if err != nil {
		return nil, PlanListOutput{}, err
	}
	root, err := os.OpenRoot(ws.Dir)
	if err != nil {
		return nil, PlanListOutput{}, err
	}
	defer root.Close()
	out := PlanListOutput{Plans: make([]ListedPlan, 0, len(listed))}
	for _, l := range listed {
		p := ListedPlan{Name: l.Name, File: l.File, Status: l.Status, Errors: l.Errors, Steps: []ListedStep{}}
		var pf core.PlanFile
		if filepath.IsLocal(filepath.FromSlash(l.File)) {
			pf = engine.ReadPlanFileIn(root, l.File)
		} else {
			pf = engine.ReadPlanFile(filepath.Join(dir, filepath.Base(l.File)), l.File)
		}
		if pf.Plan == nil {
			p.Status = core.PlanInvalid
			if len(p.Errors) == 0 {
				p.Errors = engine.ErrorLines(pf.Err)
			}
			out.Plans = append(out.Plans, p)
			continue
		}
		p.Valid = p.Status != core.PlanInvalid
		for _, s := range pf.Plan.Steps {
			p.Steps = append(p.Steps, ListedStep{ID: s.ID, Title: s.Spec.Title})
		}
		p.Params = paramsSchema(pf.Plan.Params)
		out.Plans = append(out.Plans, p)
	}
	return nil, out, nil
}

// paramsSchema is the JSON Schema of the params object a run of a plan takes;
// nil when it declares none.
func paramsSchema(params []plan.Param) map[string]any {
	if len(params) == 0 {
		return nil
	}
	props := map[string]any{}
	required := []string{}
	for _, p := range params {
		var s any = map[string]any{}
		_ = json.Unmarshal(p.Schema, &s)
		if m, ok := s.(map[string]any); ok && p.HasDefault {
			if _, has := m["default"]; !has {
				m["default"] = p.Default
			}
		}
		props[p.Name] = s
		if !p.HasDefault {
			required = append(required, p.Name)
		}
	}
	return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}
}
