package plan

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/stepseq/stepseq/planspec"
)

// jsonSchema is the subset of JSON Schema (draft 2020-12) that Schema uses.
// Fields are in the order editors show them best.
type jsonSchema struct {
	Schema               string                 `json:"$schema,omitempty"`
	ID                   string                 `json:"$id,omitempty"`
	Title                string                 `json:"title,omitempty"`
	Description          string                 `json:"description,omitempty"`
	Type                 any                    `json:"type,omitempty"` // a type name, or a list of them
	Enum                 []string               `json:"enum,omitempty"`
	AnyOf                []*jsonSchema          `json:"anyOf,omitempty"`
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

// approvalSchema is a gate's setting: its word, or {timeout, onTimeout}.
func approvalSchema(word *jsonSchema, description string) *jsonSchema {
	return &jsonSchema{Description: description, AnyOf: []*jsonSchema{word, {
		Type: "object", AdditionalProperties: ptr(false),
		Properties: map[string]*jsonSchema{
			"timeout": {Type: "string", Pattern: planspec.DurationPattern, Description: "How long the gate waits for an answer.", Examples: []any{"2h"}},
			"onTimeout": {Type: "string", Enum: planspec.Texts(planspec.OnTimeoutWords),
				Description: "What an unanswered gate becomes at its timeout: reject (the default) or approve."},
		},
	}}}
}

// group is the schema of a repeat group, whose entries are steps.
func group(step *jsonSchema) *jsonSchema {
	return &jsonSchema{
		Type:                 "object",
		Description:          "A repeat group: its steps run in order, once per round, until a step's exit holds or max rounds have run. Groups do not nest.",
		Required:             []string{"id", "repeat", "steps"},
		AdditionalProperties: ptr(false),
		Properties: map[string]*jsonSchema{
			"id":    {Type: "string", Pattern: planspec.IDPatternJSON, Examples: []any{"rounds"}, Description: "Unique id of the group, among the steps' ids too."},
			"title": {Type: "string", MinLength: ptr(1), Pattern: `\S`, Description: "A short line saying what the loop does."},
			"repeat": {Type: "object", Required: []string{"max"}, AdditionalProperties: ptr(false),
				Description: "How many rounds: round counts from 1; rounds holds the finished rounds' run records (the latest 10).",
				Properties: map[string]*jsonSchema{
					"max": {Description: "The most rounds the loop runs, from 1 to 1000.", AnyOf: []*jsonSchema{
						{Type: "integer", Minimum: ptr(1)},
						{Type: "string", MinLength: ptr(1), Description: "An expression evaluated when the loop starts, like params.max_rounds.", Examples: []any{"params.max_rounds"}},
					}},
					"onMax": {Type: "string", Enum: planspec.Texts(planspec.OnMaxWords),
						Description: "What reaching max does: block (default) blocks the plan, did not converge in N rounds; done goes on with the step after the group."},
				}},
			"totals": {Type: "object", Examples: []any{map[string]any{"fixed": "respond.result.fixed_count", "clean": map[string]any{"count": "review.result.findings_total == 0"}}},
				Description: "Running totals over every round, read as totals.NAME by conditions, templates and the summary (rounds keeps only the latest 10): " +
					"name → an expression over the finished round, its steps by id (respond.result.fixed_count), whose numbers are added up; " +
					"{count: EXPR} counts the rounds where it holds; {list: EXPR} keeps its value, one a round (at most 100)."},
			"steps": {Type: "array", MinItems: ptr(1), Items: step, Description: "The steps each round runs, in order."},
			"needs": needsSchema("The steps the group waits for; the group is one node of the graph, its steps a line inside it."),
		},
	}
}

// needsSchema is the schema of a needs list.
func needsSchema(desc string) *jsonSchema {
	return &jsonSchema{Type: "array", Description: desc + " A step or group without needs waits for the one written before it; [] starts with the run.",
		Items: &jsonSchema{Type: "string", Pattern: planspec.IDPatternJSON, Description: "The id of a step or a repeat group of this plan."}}
}

// graphSchemas are the schemas of a step's graph keys: what it needs, its
// foreach, its worktree.
func graphSchemas(step, plan *jsonSchema) {
	merge := &jsonSchema{Type: "string", Enum: planspec.Texts(planspec.MergeWords),
		Description: "How a worktree's branch joins: auto (default) merges it into the workspace's branch at the join, in plan order; none leaves it for a pull request."}
	worktree := &jsonSchema{Type: "boolean",
		Description: "Run each try in a git worktree of its own under .stepseq/worktrees/, on a branch stepseq/RUN/STEP, cut from the commit its needs left; the workspace must be a git repository."}
	step.Properties["needs"] = needsSchema("The steps this one waits for: it starts once they are all DONE, beside the other steps whose needs are met.")
	step.Properties["foreach"] = &jsonSchema{Type: "string", MinLength: ptr(1), Examples: []any{"steps.triage.result.items", "params.files"},
		Description: "An expression giving a list (at most 1000 items): the step runs once per item, as instances ID[0], ID[1]…, side by side; ${item} and ${index} in its texts; steps.ID.results lists their results in order."}
	step.Properties["continueOnFailure"] = &jsonSchema{Type: "boolean",
		Description: "When this step fails for good, the steps that need it go on; the failure is listed in steps.ID.failed."}
	step.Properties["worktree"] = worktree
	step.Properties["merge"] = merge
	plan.Properties["worktree"] = worktree
	plan.Properties["merge"] = merge
	plan.Properties["maxParallel"] = &jsonSchema{Type: "integer", Minimum: ptr(1),
		Description: "The most agents of this run at once; default: every step whose needs are met (the sidecar's --max-agents bounds all runs)."}
}

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
		return &jsonSchema{Type: "string", Pattern: planspec.DurationPattern, Description: desc, Examples: []any{"90s", "2m", "1h30m"}}
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
	preset := func(desc string) *jsonSchema {
		return &jsonSchema{Type: "string", Enum: append(slices.Clone(planspec.AgentPresets), planspec.AgentMCP), Description: desc + " mcp: no process starts; the step is offered to the MCP client that calls step_current."}
	}
	agent := func(desc string) *jsonSchema {
		return &jsonSchema{Description: desc, AnyOf: []*jsonSchema{
			preset("A preset: the agent CLI's usual command for one unattended try, the prompt last."),
			{Type: "object", Required: []string{"preset"}, AdditionalProperties: ptr(false),
				Description: "A preset with extra arguments, placed before the prompt.",
				Properties: map[string]*jsonSchema{
					"preset": preset("The preset."),
					"args":   list(text("one argument"), "Extra arguments; an element {prompt} places the prompt, {changed} the changed paths."),
				}},
			argv("The command as a list: argv prefix, the prompt appended (or put where an element is {prompt}); {changed} places the changed paths."),
		}}
	}
	fallback := func(desc string) *jsonSchema {
		return list(preset("A preset."), desc)
	}
	condition := func(desc string) *jsonSchema {
		s := text(desc + " An expr-lang expression that gives true or false; it can use exists(p), glob(pattern), globCount(pattern), size(p), lines(p), mtime(p), age(p), fresh(p), read(p), json(p), env(name), now(), steps, step, vars, params, and in a loop round and rounds.")
		s.Examples = []any{`exists("approved.txt")`, `size("paper/draft.md") > 2000`}
		return s
	}

	reports := func(desc string) *jsonSchema {
		return &jsonSchema{Type: "string", Enum: planspec.Texts(planspec.ReportsWords), Description: desc}
	}
	reportKeys := map[string]*jsonSchema{
		"reports":          reports("Whether the worker must report (accepted, milestone, blocked, done) with `stepseq report`, a file in .stepseq/reports/<step>/ or MCP; default optional."),
		"launchTimeout":    duration("With reports required: no accepted report this long after launch fails the try; default 10m."),
		"milestoneTimeout": duration("With reports required: no report this long while in progress blocks the step until the next report; default 10m."),
		"idleTimeout":      duration("No output byte and no report this long blocks the step, as a milestone timeout does."),
	}
	step := &jsonSchema{
		Type:                 "object",
		Description:          "One step: one agent invocation with its instruction, run until its outputs exist.",
		Required:             []string{"id", "title", "instruction"},
		AdditionalProperties: ptr(false),
		Properties: map[string]*jsonSchema{
			"id": {Type: "string", Pattern: planspec.IDPatternJSON, Examples: []any{"research", "write-paper"},
				Description: "Unique id of the step: letters, digits, \".\", \"_\" and \"-\"."},
			"title":           text("A short line saying what the step does."),
			"instruction":     text("The prompt the agent gets for this step; ${EXPR} is rendered when a try starts (params, steps, vars, …; a map or list as JSON), $${ is a literal ${."),
			"requiredOutputs": list(path("A path relative to the workspace."), "Paths that must exist after the agent exits 0 for the step to be DONE."),
			"when":            condition("Gate: the step launches only once this is true; re-checked on file events."),
			"skip":            condition("When true as the step comes up, the step is DONE without a launch (stepRuns[id].skipped = true)."),
			"check":           condition("Extra success test after exit 0 and the outputs are present."),
			"on":              list(path("A glob relative to the workspace; ** allowed."), "A change to a matching file re-runs this step and the steps after it."),
			"timeout":         duration("Longest run of one try; default: the plan's timeout, else 1h."),
			"retries":         count("Tries this step gets before it blocks the plan, the first included (1: no retry), as STEP_MAX_RETRIES counts them; default: the plan's maxRetries."),
			"awaitOutputs":    duration("After exit 0, wait this long for the outputs to appear (asynchronous agents)."),
			"agent":           agent("The agent of this step: a preset name, {preset, args}, or the command as a list; default: the plan's agent."),
			"fallback":        fallback("Presets that run the same try, in order, when the agent cannot start or says it is unavailable (not found, auth, rate or usage limit); default: the plan's fallback."),
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
			"name":       {Type: "string", Pattern: planspec.IDPatternJSON, Description: "Name of the plan; default: the file name without its extension."},
			"agent":      agent("The agent: a preset name (claude, codex, …), {preset, args}, or the command as a list, the prompt appended; default: STEP_AGENT_CMD."),
			"fallback":   fallback("Presets that run the same try, in order, when the agent cannot start or says it is unavailable (not found, auth, rate or usage limit)."),
			"stepDelay":  duration("Wait between steps and before retries; becomes stepDelayMinutes."),
			"maxRetries": count("Tries every step gets before it blocks the plan, the first included (1: no retry), as STEP_MAX_RETRIES counts them; default: STEP_MAX_RETRIES, else 3."),
			"timeout":    duration("Default timeout of one try of a step; default 1h."),
			"vars":       {Type: "object", Description: "Values visible to conditions as vars.NAME."},
			"summary": {Type: "object",
				Description: "Name → expression, evaluated when the plan ends (done or blocked) with what a condition sees plus params; kept in state.json under stepseq.summaryValues and shown by stepseq status."},
			"params": {Type: "object",
				Description: "The run's parameters: name → JSON Schema (draft 2020-12) with an optional default; given by stepseq apply --param NAME=VALUE or --params FILE, read by expressions and ${…} templates as params.NAME. One without a default is required."},
			"steps": {Type: "array", MinItems: ptr(1), Items: &jsonSchema{AnyOf: []*jsonSchema{step, group(step)}},
				Description: "The steps, in the order they run; an entry with repeat is a group whose steps run once per round."},
		},
	}
	reportKeys["limitWait"] = duration("Longest wait for an agent's usage limit to reset (every agent of the try out of quota); then the try fails with the limit as its error; default 12h.")
	reportKeys["budget"] = &jsonSchema{Type: "object", AdditionalProperties: ptr(false),
		Description: "What the run (at the top) or this step may spend; before a try starts, a bound reached launches nothing and blocks the run with the figure until `stepseq budget usd=+2` raises it. A step's budget holds beside the plan's.",
		Examples:    []any{map[string]any{"usd": 5, "tokens": 2000000, "tries": 30, "wall": "4h"}},
		Properties: map[string]*jsonSchema{
			"usd":    {Type: "number", Description: "Cost in USD, as the agents report it; an agent that reports no cost is not counted (status says so)."},
			"tokens": {Type: "integer", Minimum: ptr(1), Description: "Tokens: input, output and cache, as the agents report them."},
			"tries":  {Type: "integer", Minimum: ptr(1), Description: "Tries launched."},
			"wall":   duration("Time since the first try, usage-limit waits not counted."),
		}}
	reportKeys["resume"] = &jsonSchema{Type: "boolean", Description: "A retry continues the agent's own session (claude --resume, codex exec resume, …) with the troubleshoot prompt, when the agent named one; default false: every try starts afresh."}
	reportKeys["sandbox"] = sandboxSchema(list, path)
	for k, v := range reportKeys {
		step.Properties[k] = v
		plan.Properties[k] = v
	}
	step.Properties["result"] = &jsonSchema{Type: "object", Description: "A JSON Schema (draft 2020-12) the result of the worker's done report must satisfy; checked when the plan is validated.",
		Examples: []any{map[string]any{"type": "object", "required": []any{"url"}}}}
	step.Properties["onInvalid"] = &jsonSchema{Type: "string", Enum: planspec.Texts(planspec.OnInvalidWords),
		Description: "What a result that fails the schema does: retry (default) refuses the report and waits for a corrected one, at most 3 times; abort fails the try."}
	step.Properties["resultFrom"] = &jsonSchema{Type: "string", Pattern: "^(output|file:.+)$",
		Description: "Where the step's result comes from when its agent reports none: output (the agent's final message: claude's result, codex's last agent message, gemini's response, opencode's last text; for a command, the last JSON value on stdout) or file:PATH (a JSON or YAML file in the workspace). A done report's result wins. The result is checked against result."}
	step.Properties["reports"] = reports("Whether this step's worker must report; default: the plan's reports.")
	step.Properties["exit"] = condition("Checked once the step is verified: when true, leaves the loop the step is in (the rest of the round is skipped); outside a loop, ends the plan DONE. result is the step's own result.")
	abortWhen := condition("Checked before the step's first try (when it can be: one reading result waits for it) and once the step is verified: when true, blocks the plan. result is the step's own result.")
	step.Properties["abort"] = &jsonSchema{Description: abortWhen.Description, AnyOf: []*jsonSchema{abortWhen,
		{Type: "object", AdditionalProperties: ptr(false), Required: []string{"when"}, Properties: map[string]*jsonSchema{
			"when":   abortWhen,
			"reason": {Type: "string", Description: "The blocker's text when the abort holds; ${…} templates read what the condition reads."},
		}}}}
	step.Properties["approve"] = approvalSchema(&jsonSchema{Type: "boolean"},
		"true: before its first try the step waits for a person's yes (stepseq approve, MCP approve, the page's button); a reject blocks it with the note. {timeout, onTimeout} bounds the wait.")
	plan.Properties["approval"] = approvalSchema(&jsonSchema{Type: "string", Enum: []string{planspec.ApprovalRequired}},
		"required: the plan waits for a person's yes before its first step (propose, then confirm). {timeout, onTimeout} bounds the wait.")
	graphSchemas(step, plan)
	plan.Properties["prices"] = &jsonSchema{Type: "object",
		Description: "What a model's tokens cost, by model or preset, in USD per million tokens: gives a cost to the tries of agents whose output names none (codex, gemini).",
		Examples:    []any{map[string]any{"codex": map[string]any{"input": 1.25, "output": 10, "cache": 0.125}}}}
	plan.Properties["heartbeat"] = duration("How often the user hears from a step in progress with nothing new; default 5m.")
	plan.Properties["notify"] = &jsonSchema{Type: "array", Description: "Where every transition is reported, beside .stepseq/notifications.jsonl.",
		Items: &jsonSchema{Type: "object", AdditionalProperties: ptr(false), Description: "A sink: {command: [argv]} gets the report as JSON on stdin; {webhook: URL} gets it POSTed.",
			Properties: map[string]*jsonSchema{
				"command": argv("A command run for each report, without a shell; the report JSON on stdin."),
				"webhook": {Type: "string", Pattern: "^https?://", Description: "An http or https URL the report JSON is POSTed to."},
			}}}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(plan); err != nil {
		panic("planspec: schema does not encode: " + err.Error()) // built from literals above
	}
	return b.Bytes()
}

// sandboxSchema is the schema of `sandbox:`, on a plan and on a step.
func sandboxSchema(list func(*jsonSchema, string) *jsonSchema, path func(string) *jsonSchema) *jsonSchema {
	return &jsonSchema{
		Description: "Run the agent in a bubblewrap sandbox (Linux): the filesystem read-only but its workspace (not .stepseq/, the run files, plans/), its report folder, a private /tmp, the write paths and its CLI's config folder; only the environment stepseq sets, the preset needs and env lists. true, or a mapping; a step's replaces the plan's. Default: not sandboxed, unless stepseq runs with --sandbox.",
		AnyOf: []*jsonSchema{
			{Type: "boolean"},
			{Type: "object", AdditionalProperties: ptr(false), Properties: map[string]*jsonSchema{
				"network": {Type: "boolean", Description: "Keep the host's network (default true: agent CLIs reach their model's API); false gives an empty network namespace."},
				"write":   list(path("A path: absolute, ~/…, or relative to the workspace."), "More writable paths, made as folders when missing."),
				"read":    list(path("A path: absolute, ~/…, or relative to the workspace."), "Paths shown read-only where the sandbox hides them (under /tmp)."),
				"env":     list(&jsonSchema{Type: "string", Pattern: "^[^=\\s]+$"}, "Names of variables the agent sees beyond those stepseq sets and its preset needs."),
			}},
		},
	}
}
