package planspec

import (
	"bytes"
	"encoding/json"
)

// durationPattern is what ParseDuration accepts, as a JSON Schema pattern:
// "90s", "2m", "1h30m", "1.5h", "0s" (no sign: negative spans are refused).
const durationPattern = `^\+?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`

// jsonSchema is the subset of JSON Schema (draft 2020-12) that Schema uses.
// Fields are in the order editors show them best.
type jsonSchema struct {
	Schema               string                 `json:"$schema,omitempty"`
	ID                   string                 `json:"$id,omitempty"`
	Title                string                 `json:"title,omitempty"`
	Description          string                 `json:"description,omitempty"`
	Type                 string                 `json:"type,omitempty"`
	Required             []string               `json:"required,omitempty"`
	AdditionalProperties *bool                  `json:"additionalProperties,omitempty"`
	Properties           map[string]*jsonSchema `json:"properties,omitempty"`
	Items                *jsonSchema            `json:"items,omitempty"`
	MinItems             *int                   `json:"minItems,omitempty"`
	MinLength            *int                   `json:"minLength,omitempty"`
	Minimum              *int                   `json:"minimum,omitempty"`
	Pattern              string                 `json:"pattern,omitempty"`
	Examples             []any                  `json:"examples,omitempty"`
}

func ptr[T any](v T) *T { return &v }

// Schema returns the JSON Schema (draft 2020-12) of the plan format, for editors:
// a plan that starts with `# yaml-language-server: $schema=<file>` gets
// completion, hover docs and key checks. It describes what ParsePlan accepts
// except what a schema cannot say: unique ids, paths that leave the workspace
// through "..", and conditions that do not compile.
func Schema() []byte {
	str := func(desc string) *jsonSchema {
		return &jsonSchema{Type: "string", MinLength: ptr(1), Description: desc}
	}
	text := func(desc string) *jsonSchema {
		s := str(desc)
		s.Pattern = `\S`
		return s
	}
	duration := func(desc string) *jsonSchema {
		return &jsonSchema{Type: "string", Pattern: durationPattern, Description: desc, Examples: []any{"90s", "2m", "1h30m"}}
	}
	count := func(desc string) *jsonSchema {
		return &jsonSchema{Type: "integer", Minimum: ptr(0), Description: desc}
	}
	path := func(desc string) *jsonSchema {
		return &jsonSchema{Type: "string", MinLength: ptr(1), Pattern: `^[^/\\]`, Description: desc}
	}
	list := func(item *jsonSchema, desc string) *jsonSchema {
		return &jsonSchema{Type: "array", Items: item, Description: desc}
	}
	argv := func(desc string) *jsonSchema {
		s := list(text("one argument"), desc)
		s.MinItems = ptr(1)
		return s
	}
	condition := func(desc string) *jsonSchema {
		s := text(desc + " An expr-lang expression that gives true or false; it can use exists(p), glob(pattern), globCount(pattern), size(p), lines(p), mtime(p), age(p), fresh(p), read(p), json(p), env(name), now(), steps, step and vars.")
		s.Examples = []any{`exists("approved.txt")`, `size("paper/draft.md") > 2000`}
		return s
	}

	step := &jsonSchema{
		Type:                 "object",
		Description:          "One step: one agent invocation with its instruction, run until its outputs exist.",
		Required:             []string{"id", "title", "instruction"},
		AdditionalProperties: ptr(false),
		Properties: map[string]*jsonSchema{
			"id": {Type: "string", Pattern: idPatternJSON, Examples: []any{"research", "write-paper"},
				Description: "Unique id of the step: letters, digits, \".\", \"_\" and \"-\"."},
			"title":           text("A short line saying what the step does."),
			"instruction":     text("The prompt the agent gets for this step."),
			"requiredOutputs": list(path("A path relative to the workspace."), "Paths that must exist after the agent exits 0 for the step to be DONE."),
			"when":            condition("Gate: the step launches only once this is true; re-checked on file events."),
			"skip":            condition("When true as the step comes up, the step is DONE without a launch (stepRuns[id].skipped = true)."),
			"check":           condition("Extra success test after exit 0 and the outputs are present."),
			"on":              list(path("A glob relative to the workspace; ** allowed."), "A change to a matching file re-runs this step and the steps after it."),
			"timeout":         duration("Longest run of one try; default: the plan's timeout, else 1h."),
			"retries":         count("Retry limit of this step; default: the plan's maxRetries."),
			"awaitOutputs":    duration("After exit 0, wait this long for the outputs to appear (asynchronous agents)."),
			"agent":           argv("The agent command of this step: argv prefix, the prompt appended (or put where an element is {prompt})."),
		},
	}
	plan := &jsonSchema{
		Schema:               "https://json-schema.org/draft/2020-12/schema",
		ID:                   "https://github.com/stepseq/stepseq/plan.schema.json",
		Title:                "stepseq plan",
		Description:          "A plan for stepseq: steps run one after the other, each by a fresh agent invocation.",
		Type:                 "object",
		Required:             []string{"steps"},
		AdditionalProperties: ptr(false),
		Properties: map[string]*jsonSchema{
			"name":       {Type: "string", Pattern: idPatternJSON, Description: "Name of the plan; default: the file name without its extension."},
			"agent":      argv("Agent command: argv prefix, the prompt appended; default: STEP_AGENT_CMD."),
			"stepDelay":  duration("Wait between steps and before retries; becomes stepDelayMinutes."),
			"maxRetries": count("Retry limit of every step; default: STEP_MAX_RETRIES, else 3."),
			"timeout":    duration("Default timeout of one try of a step; default 1h."),
			"vars":       {Type: "object", Description: "Values visible to conditions as vars.NAME."},
			"steps": {Type: "array", MinItems: ptr(1), Items: step,
				Description: "The steps, in the order they run."},
		},
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(plan); err != nil {
		panic("planspec: schema does not encode: " + err.Error()) // built from literals above
	}
	return b.Bytes()
}
