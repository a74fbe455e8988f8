package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
	"github.com/stepseq/stepseq/planspec/plan"
)

// Code says why a tool refused a call, from DESIGN §9's fixed list, so that an
// agent can branch on it; the reasons say it in words.
type Code string

// The refusal codes (DESIGN §9). The list is fixed: a new kind of refusal takes
// the code that tells the agent what to do about it.
const (
	// NotFound: no such step, plan, run or try.
	NotFound Code = "not_found"
	// Stale: a token for a try that is over, or one this workspace never issued.
	Stale Code = "stale"
	// InvalidPlan: a plan, or a run's state file, that does not parse or check.
	InvalidPlan Code = "invalid_plan"
	// InvalidParams: arguments the tool's input schema refuses (a null, a missing
	// or unknown field, a wrong type), a report missing its fields, or a plan's
	// params that fail its params' schema.
	InvalidParams Code = "invalid_params"
	// InvalidResult: a done report whose result fails the step's result schema.
	InvalidResult Code = "invalid_result"
	// NotAllowed: an agent this source may not name (DESIGN §15), or a report
	// the step's phase does not take now.
	NotAllowed Code = "not_allowed"
	// Busy: the workspace cannot answer now (its sidecar stops, gives no verdict
	// in time, or fails to read or write); the same call may succeed later.
	Busy Code = "busy"
	// Closed: the run was closed.
	Closed Code = "closed"
	// Unauthorized: no token, or a wrong one, over HTTP. The listener's guard
	// answers it before any tool runs (listener.Guard).
	Unauthorized Code = "unauthorized"
)

// Codes is the fixed list, in DESIGN §9's order.
var Codes = []Code{NotFound, Stale, InvalidPlan, InvalidParams, InvalidResult, NotAllowed, Busy, Closed, Unauthorized}

// Refusal is a tool's refusal: its code and every reason in words. A tool
// returns it as its error; the answer is isError with the code and the reasons
// in its structured content.
type Refusal struct {
	Code    Code
	Reasons []string
}

func (r *Refusal) Error() string { return string(r.Code) + ": " + strings.Join(r.Reasons, "; ") }

// refuse is a refusal with code for reasons.
func refuse(code Code, reasons ...string) *Refusal { return &Refusal{Code: code, Reasons: reasons} }

// refusalOf makes any error a tool returns a refusal: the engine's sentinel
// errors each map to the code that says what the agent can do. This is the one
// place the mapping lives.
func refusalOf(err error) *Refusal {
	var r *Refusal
	if errors.As(err, &r) {
		return r
	}
	var params *plan.ParamsError
	if errors.As(err, &params) {
		return refuse(InvalidParams, params.Problems...)
	}
	code := Busy
	switch {
	case errors.Is(err, engine.ErrStaleToken):
		code = Stale
		err = errors.New(strings.TrimPrefix(err.Error(), engine.ErrStaleToken.Error()+": "))
	case errors.Is(err, engine.ErrNotAllowed), errors.Is(err, engine.ErrNotRetryable):
		code = NotAllowed
	case errors.Is(err, engine.ErrNoStep), errors.Is(err, store.ErrNoRun):
		code = NotFound
	case errors.Is(err, store.ErrRunClosed):
		code = Closed
	case errors.Is(err, store.ErrRunName), errors.Is(err, store.ErrRunExists), errors.Is(err, core.ErrBudgetChange):
		code = InvalidParams
	case errors.Is(err, store.ErrRunBusy), errors.Is(err, engine.ErrPlanActive):
		code = Busy
	case errors.Is(err, plan.ErrInvalidPlan), errors.Is(err, planspec.ErrInvalidState), errors.Is(err, planspec.ErrAgentRunsCode),
		errors.Is(err, store.ErrStateTooBig), errors.Is(err, store.ErrStateIsFolder), errors.Is(err, store.ErrSymlink):
		code = InvalidPlan
	case errors.Is(err, engine.ErrStopped), errors.Is(err, engine.ErrNoVerdict), errors.Is(err, context.DeadlineExceeded):
		code = Busy
	}
	return refuse(code, err.Error())
}

// Where the core's words for a refused report begin (executor/core's report
// admission and result check): they say which code the refusal takes.
const (
	stalePrefix         = "stale: "
	invalidResultPrefix = "result does not satisfy the step's result schema"
)

// reportRefusal is the refusal of a report the sidecar judged and did not take:
// stale when the try is over, invalid_result when the result fails its schema,
// invalid_params when the report itself is incomplete or malformed, and
// not_allowed when it is well formed but the step's phase does not take it now.
func reportRefusal(reasons []string, rep planspec.Report) *Refusal {
	code := NotAllowed
	switch {
	case len(reasons) == 0:
		reasons, code = []string{"refused without a reason"}, Busy
	case containsPrefix(reasons, stalePrefix):
		code = Stale
	case containsPrefix(reasons, invalidResultPrefix):
		code = InvalidResult
	case len(rep.Problems()) > 0:
		code = InvalidParams
	case containsPrefix(reasons, "no step "):
		code = NotFound
	}
	return refuse(code, reasons...)
}

func containsPrefix(l []string, prefix string) bool {
	for _, s := range l {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// refusalResult is the answer to a refused call: isError, the code and the
// reasons as text and as structured content. detail, when not nil, is the
// tool's own answer with what it knew (step_report's step and try); its fields
// are kept beside the code and the reasons.
func refusalResult(r *Refusal, detail any) *sdk.CallToolResult {
	out := map[string]any{}
	if detail != nil {
		if data, err := json.Marshal(detail); err == nil {
			_ = json.Unmarshal(data, &out)
		}
	}
	reasons := r.Reasons
	if len(reasons) == 0 {
		reasons = []string{string(r.Code)}
	}
	out["code"], out["reasons"] = r.Code, reasons
	return &sdk.CallToolResult{IsError: true, StructuredContent: out,
		Content: []sdk.Content{&sdk.TextContent{Text: string(r.Code) + ": " + strings.Join(reasons, "; ")}}}
}
