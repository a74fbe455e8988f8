package planspec

import (
	"fmt"

	"github.com/stepseq/stepseq/planspec/resultschema"
)

// A step's `result:` is a JSON Schema (draft 2020-12) the value of its worker's
// done report must satisfy; `onInvalid` says what an invalid value
// costs: another report (retry) or the try (abort).

// OnInvalid words.
const (
	OnInvalidRetry = "retry"
	OnInvalidAbort = "abort"
)

// MaxInvalidResults bounds the invalid results one try may send with onInvalid:
// retry; the next one fails the try.
const MaxInvalidResults = 3

// AgentMCP is the agent of a pulled step: no process starts; the step is offered to
// the MCP client that asks for work.
const AgentMCP = "mcp"

// IsPull reports whether an agent is the pull model: `agent: mcp` (or [mcp]).
func IsPull(a AgentSpec) bool {
	return a.Preset == AgentMCP || len(a.Argv) == 1 && a.Argv[0] == AgentMCP
}

// ResultSchema returns step id's compiled result schema, nil when it has none.
// Plans check their schemas when they are validated; a state edited by hand with a
// bad one gets the error here.
func (s *State) ResultSchema(id string) (*resultschema.Schema, error) {
	sp := s.Steps[id]
	if sp == nil || len(sp.Result) == 0 {
		return nil, nil
	}
	rs, err := resultschema.Compile(sp.Result)
	if err != nil {
		return nil, fmt.Errorf("step %s: result schema: %w", id, err)
	}
	return rs, nil
}

// OnInvalidMode is step id's onInvalid, retry by default.
func (s *State) OnInvalidMode(id string) string {
	if sp := s.Steps[id]; sp != nil && sp.OnInvalid != "" {
		return sp.OnInvalid
	}
	return OnInvalidRetry
}

// IsPull reports whether step id is pulled over MCP rather than launched: its
// agent, or else the plan's, is `mcp`.
func (s *State) IsPull(id string) bool {
	if sp := s.Steps[id]; sp != nil && !sp.Agent.IsZero() {
		return IsPull(sp.Agent)
	}
	return IsPull(s.Settings.Agent)
}
