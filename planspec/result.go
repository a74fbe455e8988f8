package planspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// A step's `result:` is a JSON Schema (draft 2020-12) the value of its worker's
// done report must satisfy (DESIGN §7, §9); `onInvalid` says what an invalid value
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
// the MCP client that asks for work (DESIGN §9).
const AgentMCP = "mcp"

// IsPull reports whether an agent is the pull model: `agent: mcp` (or [mcp]).
func IsPull(a AgentSpec) bool {
	return a.Preset == AgentMCP || len(a.Argv) == 1 && a.Argv[0] == AgentMCP
}

// ResultSchema is a compiled result schema.
type ResultSchema struct {
	sch *jsonschema.Schema
}

var (
	resultSchemas sync.Map // string(raw) → *ResultSchema
	schemaPrinter = message.NewPrinter(language.English)
)

// noLoader refuses every reference that leaves the schema: a plan's schema must not
// read files or the network.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s: a result schema may only refer to itself ($ref to #/$defs/…)", url)
}

// CompileResultSchema compiles a result schema given as JSON. Schemas already
// compiled are not compiled again.
func CompileResultSchema(raw json.RawMessage) (*ResultSchema, error) {
	if c, ok := resultSchemas.Load(string(raw)); ok {
		return c.(*ResultSchema), nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	switch doc.(type) {
	case map[string]any, bool:
	default:
		return nil, fmt.Errorf("want a JSON Schema object, like {type: object, required: [url]}")
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	const url = "stepseq:///result.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, errors.New(strings.ReplaceAll(err.Error(), url, "result"))
	}
	rs := &ResultSchema{sch: sch}
	resultSchemas.Store(string(raw), rs)
	return rs, nil
}

// Validate checks a result against the schema and returns every violation as
// "<instance path>: <message>", the path "/" for the value itself. A missing
// result is one violation.
func (rs *ResultSchema) Validate(result json.RawMessage) []string {
	if len(bytes.TrimSpace(result)) == 0 {
		return []string{"/: no result: the done report must carry a result that satisfies the step's result schema"}
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(result))
	if err != nil {
		return []string{"/: not JSON: " + err.Error()}
	}
	err = rs.sch.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []string{"/: " + err.Error()}
	}
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			out = append(out, instancePath(e.InstanceLocation)+": "+e.ErrorKind.LocalizedString(schemaPrinter))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return slices.Compact(out)
}

func instancePath(tokens []string) string {
	if len(tokens) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		t = strings.ReplaceAll(t, "~", "~0")
		b.WriteString(strings.ReplaceAll(t, "/", "~1"))
	}
	return b.String()
}

// ResultSchema returns step id's compiled result schema, nil when it has none.
// Plans check their schemas when they are validated; a state edited by hand with a
// bad one gets the error here.
func (s *State) ResultSchema(id string) (*ResultSchema, error) {
	sp := s.Steps[id]
	if sp == nil || len(sp.Result) == 0 {
		return nil, nil
	}
	rs, err := CompileResultSchema(sp.Result)
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
