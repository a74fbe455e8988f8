package engine

import (
	"context"
	"errors"
	"strings"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
	planpkg "github.com/stepseq/stepseq/planspec/plan"
)

// Code says why a command was refused, from a fixed list, so that a caller (an
// agent over MCP, a script reading the exit status) can branch on it; the
// reasons say it in words.
type Code string

// The refusal codes. The list is fixed: a new kind of refusal takes the code
// that tells the caller what to do about it.
const (
	// NotFound: no such step, plan, run or try.
	NotFound Code = "not_found"
	// Stale: a token for a try that is over, or one this workspace never issued.
	Stale Code = "stale"
	// InvalidPlan: a plan, or a run's state file, that does not parse or check.
	InvalidPlan Code = "invalid_plan"
	// InvalidParams: arguments the command refuses (a null, a missing or
	// unknown field, a wrong type), a report missing its fields, or a plan's
	// params that fail its params' schema.
	InvalidParams Code = "invalid_params"
	// InvalidResult: a done report whose result fails the step's result schema.
	InvalidResult Code = "invalid_result"
	// NotAllowed: an agent this source may not name, a retry of a step that is
	// neither blocked nor failed, a report the step's phase does not take now,
	// or an answer to a gate that does not wait or that a launched agent gives.
	NotAllowed Code = "not_allowed"
	// Busy: the workspace cannot answer now (its sidecar stops, gives no verdict
	// in time, or fails to read or write), or the name asked for is in use (a
	// plan or run of that name, whose owner the reasons name); the same call
	// may succeed later, or under another name.
	Busy Code = "busy"
	// Closed: the run was closed.
	Closed Code = "closed"
	// Unauthorized: no token, or a wrong one, over HTTP.
	Unauthorized Code = "unauthorized"
)

// Codes is the fixed list.
var Codes = []Code{NotFound, Stale, InvalidPlan, InvalidParams, InvalidResult, NotAllowed, Busy, Closed, Unauthorized}

// Refusal is a command's refusal: its code and every reason in words. Err, when
// set, is the error it stands for, which errors.Is and the message keep.
type Refusal struct {
	Code    Code
	Reasons []string
	Err     error
}

func (r *Refusal) Error() string {
	if r.Err != nil {
		return r.Err.Error()
	}
	return string(r.Code) + ": " + strings.Join(r.Reasons, "; ")
}

func (r *Refusal) Unwrap() error { return r.Err }

// RefusalOf makes any error a command returns a refusal: the sentinel errors
// each map to the code that says what the caller can do. This is the one place
// the mapping lives; nil stays nil.
func RefusalOf(err error) *Refusal {
	if err == nil {
		return nil
	}
	var r *Refusal
	if errors.As(err, &r) {
		return r
	}
	var params *planpkg.ParamsError
	if errors.As(err, &params) {
		return &Refusal{Code: InvalidParams, Reasons: params.Problems, Err: err}
	}
	var refused *RefusedError
	if errors.As(err, &refused) {
		reasons := refused.Reasons
		if len(reasons) == 0 {
			reasons = []string{"refused without a reason"}
		}
		return &Refusal{Code: reportCode(refused.Reasons, refused.Problems), Reasons: reasons, Err: err}
	}
	msg := err.Error()
	if errors.Is(err, ErrStaleToken) {
		msg = strings.TrimPrefix(msg, ErrStaleToken.Error()+": ")
	}
	return &Refusal{Code: codeOf(err), Reasons: []string{msg}, Err: err}
}

// codeOf is the code of a sentinel error; Busy for any other.
func codeOf(err error) Code {
	switch {
	case errors.Is(err, ErrStaleToken):
		return Stale
	case errors.Is(err, ErrNotAllowed), errors.Is(err, ErrNotRetryable), errors.Is(err, ErrNotWaiting), errors.Is(err, ErrLaunchedAgent),
		errors.Is(err, ErrAgentBudget):
		return NotAllowed
	case errors.Is(err, ErrNoNote), errors.Is(err, core.ErrBudgetChange):
		return InvalidParams
	case errors.Is(err, ErrNoStep), errors.Is(err, store.ErrNoRun):
		return NotFound
	case errors.Is(err, store.ErrRunClosed):
		return Closed
	case errors.Is(err, store.ErrRunName):
		return InvalidParams
	case errors.Is(err, planpkg.ErrInvalidPlan), errors.Is(err, planspec.ErrInvalidState), errors.Is(err, planspec.ErrAgentRunsCode),
		errors.Is(err, store.ErrStateTooBig), errors.Is(err, store.ErrStateIsFolder), errors.Is(err, store.ErrSymlink):
		return InvalidPlan
	case errors.Is(err, store.ErrRunBusy), errors.Is(err, ErrPlanActive), errors.Is(err, store.ErrRunExists), errors.Is(err, ErrStopped),
		errors.Is(err, ErrNoVerdict), errors.Is(err, context.DeadlineExceeded):
		return Busy
	}
	return Busy
}

// Where the core's words for a refused report begin (its report admission and
// result check): they say which code the refusal takes.
const (
	stalePrefix         = "stale: "
	invalidResultPrefix = "result does not satisfy the step's result schema"
	noStepPrefix        = "no step "
)

// reportCode is the code of a report judged and not taken: stale when the try
// is over, invalid_result when the result fails its schema, invalid_params
// when the report itself is incomplete or malformed (problems), not_found for a
// step the plan does not have, and not_allowed when it is well formed but the
// step's phase does not take it now.
func reportCode(reasons []string, problems bool) Code {
	switch {
	case len(reasons) == 0:
		return Busy
	case containsPrefix(reasons, stalePrefix):
		return Stale
	case containsPrefix(reasons, invalidResultPrefix):
		return InvalidResult
	case problems:
		return InvalidParams
	case containsPrefix(reasons, noStepPrefix):
		return NotFound
	}
	return NotAllowed
}

func containsPrefix(l []string, prefix string) bool {
	for _, s := range l {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}
