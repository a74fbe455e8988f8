package mcp

import (
	"context"
	"strconv"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stepseq/stepseq/planspec"
)

// BudgetInput is a run's budget as run_start takes it.
type BudgetInput struct {
	USD    float64 `json:"usd,omitempty" jsonschema:"cost in USD, as the agents report it"`
	Tokens int64   `json:"tokens,omitempty" jsonschema:"tokens: input, output and cache"`
	Tries  int     `json:"tries,omitempty" jsonschema:"tries launched"`
	Wall   string  `json:"wall,omitempty" jsonschema:"time since the first try, usage-limit waits not counted, like 4h"`
}

// budget is the budget given; zero when none is.
func (in *BudgetInput) budget() (planspec.Budget, error) {
	if in == nil {
		return planspec.Budget{}, nil
	}
	var parts []string
	if in.USD != 0 {
		parts = append(parts, "usd="+strconv.FormatFloat(in.USD, 'f', -1, 64))
	}
	if in.Tokens != 0 {
		parts = append(parts, "tokens="+strconv.FormatInt(in.Tokens, 10))
	}
	if in.Tries != 0 {
		parts = append(parts, "tries="+strconv.Itoa(in.Tries))
	}
	if in.Wall != "" {
		parts = append(parts, "wall="+in.Wall)
	}
	if len(parts) == 0 {
		return planspec.Budget{}, nil
	}
	b, err := planspec.ParseBudget(strings.Join(parts, ","))
	if err != nil {
		return b, refuse(InvalidParams, "arguments.budget: "+err.Error())
	}
	return b, nil
}

// BudgetChangeInput changes a run's budget.
type BudgetChangeInput struct {
	Changes []string `json:"changes" jsonschema:"each KEY=+AMOUNT (raise) or KEY=VALUE (set), keys usd, tokens, tries, wall: like usd=+2, tries=40, wall=+1h"`
	Step    string   `json:"step,omitempty" jsonschema:"change this step's own budget; default the bound that holds the run"`
	Run     string   `json:"run,omitempty" jsonschema:"the run; default the workspace's own, state.json"`
}

// BudgetChanged says the change was taken.
type BudgetChanged struct {
	Changes string `json:"changes"`
	Queued  bool   `json:"queued"`
}

// budget hands the change to the engine's one method for it, from an
// operator's session only: an agent may not raise its own run's budget.
func (t *tools) budget(ctx context.Context, req *sdk.CallToolRequest, in BudgetChangeInput) (*sdk.CallToolResult, BudgetChanged, error) {
	if r := t.operator(req, budgetAct); r != nil {
		return nil, BudgetChanged{}, r
	}
	cs, err := planspec.ParseBudgetChanges(in.Changes)
	if err != nil {
		return nil, BudgetChanged{}, refuse(InvalidParams, "arguments.changes: "+err.Error())
	}
	v, err := t.runOf(in.Run)
	if err != nil {
		return nil, BudgetChanged{}, err
	}
	defer v.close()
	cmds := v.eng.Commands()
	cmds.Env = t.clientEnv()
	if _, err := cmds.Budget(ctx, in.Step, in.Changes, "mcp"); err != nil {
		return nil, BudgetChanged{}, err
	}
	return nil, BudgetChanged{Changes: planspec.ChangesText(cs), Queued: true}, nil
}

// UsageInput is what a try spent, as a worker reports it.
type UsageInput struct {
	InputTokens  int64    `json:"inputTokens,omitempty" jsonschema:"input tokens, not read from a cache"`
	OutputTokens int64    `json:"outputTokens,omitempty" jsonschema:"output tokens"`
	CacheTokens  int64    `json:"cacheTokens,omitempty" jsonschema:"tokens read from or written to a cache"`
	CostUSD      *float64 `json:"costUsd,omitempty" jsonschema:"what the try cost, in USD"`
	Model        string   `json:"model,omitempty" jsonschema:"the model the try ran on"`
}

func (in *UsageInput) usage() planspec.Usage {
	return planspec.Usage{Model: in.Model, InputTokens: in.InputTokens, OutputTokens: in.OutputTokens, CacheTokens: in.CacheTokens, CostUSD: in.CostUSD}
}
