package mcp

import (
	"encoding/json"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stepseq/stepseq/executor/engine"
)

// Code says why a tool refused a call, so that an agent can branch on it: the
// engine's codes, which every face maps its refusals to.
type Code = engine.Code

// The refusal codes: the engine's fixed list.
const (
	NotFound      = engine.NotFound
	Stale         = engine.Stale
	InvalidPlan   = engine.InvalidPlan
	InvalidParams = engine.InvalidParams
	InvalidResult = engine.InvalidResult
	NotAllowed    = engine.NotAllowed
	Busy          = engine.Busy
	Closed        = engine.Closed
	// Unauthorized: the listener's guard answers it before any tool runs
	// (listener.Guard).
	Unauthorized = engine.Unauthorized
)

// Codes is the fixed list.
var Codes = engine.Codes

// Refusal is a tool's refusal: its code and every reason in words. A tool
// returns it as its error; the answer is isError with the code and the reasons
// in its structured content.
type Refusal = engine.Refusal

// refuse is a refusal with code for reasons.
func refuse(code Code, reasons ...string) *Refusal { return &Refusal{Code: code, Reasons: reasons} }

// refusalOf makes any error a tool returns a refusal (engine.RefusalOf).
func refusalOf(err error) *Refusal { return engine.RefusalOf(err) }

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
