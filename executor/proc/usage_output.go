package proc

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/planspec"
)

// What a try spent, read from the output each preset already reads for its
// verdict. Every format is the CLI's own, as its npm package prints it:
// @anthropic-ai/claude-code 2.1.332 (the result's total_cost_usd, usage and
// modelUsage), @openai/codex 0.171.0 (turn.completed's usage), @google/gemini-cli
// 0.61.0 (the JSON output's stats), opencode-ai 1.18.33 (each step_finish's
// tokens and cost). An output that names no usage is unknown (nil), never zero.

// usageReaders read a preset's usage; a preset not listed names none.
var usageReaders = map[string]func(core.Exit) (*planspec.Usage, error){
	"claude":   claudeUsage,
	"codex":    codexUsage,
	"gemini":   geminiUsage,
	"opencode": opencodeUsage,
}

// usageLines are the stdout lines a preset sums its usage from, wherever they
// fall in a long output: proc.Spec.KeepLines.
var usageLines = map[string]string{
	"opencode": `{"type":"step_finish"`,
}

// UsageLines is the prefix of the stdout lines the agent's usage is summed
// from, for Spec.KeepLines; "" when its usage is read from the output's end.
func (a Agent) UsageLines() string { return usageLines[a.Preset] }

// Usage is what the try's output says it spent: nil and no error when it says
// nothing (an agent given as a command, a CLI that printed no usage), an error
// when its usage does not read (the caller journals it and counts the try's
// usage as unknown).
func (a Agent) Usage(exit core.Exit) (*planspec.Usage, error) {
	read, ok := usageReaders[a.Preset]
	if !ok {
		return nil, nil
	}
	u, err := read(exit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.Preset, err)
	}
	if u != nil {
		if err := u.Check(); err != nil {
			return nil, fmt.Errorf("%s: usage: %w", a.Preset, err)
		}
	}
	return u, nil
}

// claudeResultUsage is what claude's result says it spent. Members are kept raw
// so that one of the wrong type is told as such, not lost with the rest.
type claudeResultUsage struct {
	Type         string          `json:"type"`
	TotalCostUSD json.RawMessage `json:"total_cost_usd"`
	Usage        json.RawMessage `json:"usage"`
	ModelUsage   json.RawMessage `json:"modelUsage"`
}

type claudeTokens struct {
	InputTokens   int64 `json:"input_tokens"`
	CacheCreation int64 `json:"cache_creation_input_tokens"`
	CacheRead     int64 `json:"cache_read_input_tokens"`
	OutputTokens  int64 `json:"output_tokens"`
}

type claudeModelUsage struct {
	InputTokens              int64   `json:"inputTokens"`
	OutputTokens             int64   `json:"outputTokens"`
	CacheReadInputTokens     int64   `json:"cacheReadInputTokens"`
	CacheCreationInputTokens int64   `json:"cacheCreationInputTokens"`
	CostUSD                  float64 `json:"costUSD"`
}

// claudeUsage reads claude's result (`--output-format json`, the last line of
// stream-json). 2.x writes type near the end of the object, after the answer,
// and its usage near the start: a result longer than the tail is read from the
// head of stdout.
func claudeUsage(exit core.Exit) (*planspec.Usage, error) {
	for _, line := range lastLines(stdoutText(exit)) {
		if t, ok := eventType(line); ok && t != "result" || !strings.HasPrefix(line, "{") || !strings.HasSuffix(line, "}") {
			continue
		}
		var r claudeResultUsage
		if json.Unmarshal([]byte(line), &r) == nil && r.Type == "result" {
			return r.usage()
		}
	}
	if r, ok := claudeHead(exit.Stdout); ok {
		return r.usage()
	}
	return nil, nil
}

// claudeHead reads the leading members of claude's result cut short by the
// head of stdout: a result is known by its members, since type comes last.
func claudeHead(head string) (claudeResultUsage, bool) {
	var r claudeResultUsage
	members := leadingMembers(head)
	_, hasSession := members["session_id"]
	_, hasError := members["is_error"]
	if string(members["type"]) != `"result"` && !(hasSession && hasError) {
		return r, false
	}
	r.Type = "result"
	r.TotalCostUSD, r.Usage, r.ModelUsage = members["total_cost_usd"], members["usage"], members["modelUsage"]
	return r, r.Usage != nil || r.ModelUsage != nil || r.TotalCostUSD != nil
}

// leadingMembers are the top-level members of the JSON object s starts with
// (after blanks) whose values are whole, up to where s is cut.
func leadingMembers(s string) map[string]json.RawMessage {
	s = strings.TrimLeft(s, " \t\r\n")
	if !strings.HasPrefix(s, "{") {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	if _, err := dec.Token(); err != nil {
		return nil
	}
	out := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		key, ok := t.(string)
		if err != nil || !ok {
			break
		}
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			break
		}
		out[key] = v
	}
	return out
}

// usage is the result's usage: the tokens of every model it called
// (modelUsage, subagents included), else its main loop's (usage); the model
// that cost the most; the result's total cost.
func (r claudeResultUsage) usage() (*planspec.Usage, error) {
	if isAbsent(r.Usage) && isAbsent(r.ModelUsage) && isAbsent(r.TotalCostUSD) {
		return nil, nil
	}
	var u planspec.Usage
	if !isAbsent(r.TotalCostUSD) {
		var c float64
		if err := json.Unmarshal(r.TotalCostUSD, &c); err != nil {
			return nil, fmt.Errorf("total_cost_usd: want a number, got %s", core.FirstChars(string(r.TotalCostUSD), 40))
		}
		u.CostUSD = &c
	}
	var models map[string]claudeModelUsage
	if !isAbsent(r.ModelUsage) {
		if err := json.Unmarshal(r.ModelUsage, &models); err != nil {
			return nil, fmt.Errorf("modelUsage: %w", err)
		}
	}
	if len(models) > 0 {
		top := -1.0
		for _, name := range slices.Sorted(mapKeysOf(models)) {
			m := models[name]
			u.InputTokens += m.InputTokens
			u.OutputTokens += m.OutputTokens
			u.CacheTokens += m.CacheReadInputTokens + m.CacheCreationInputTokens
			if m.CostUSD > top {
				u.Model, top = name, m.CostUSD
			}
		}
		return &u, nil
	}
	if !isAbsent(r.Usage) {
		var t claudeTokens
		if err := json.Unmarshal(r.Usage, &t); err != nil {
			return nil, fmt.Errorf("usage: %w", err)
		}
		u.InputTokens, u.OutputTokens, u.CacheTokens = t.InputTokens, t.OutputTokens, t.CacheCreation+t.CacheRead
	}
	return &u, nil
}

func isAbsent(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

func mapKeysOf[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// codexUsage reads the usage of codex's last turn.completed (`codex exec
// --json`): input_tokens counts the cached and cache-written ones too,
// output_tokens the reasoning ones. codex names no cost.
func codexUsage(exit core.Exit) (*planspec.Usage, error) {
	for _, line := range lastLines(stdoutText(exit)) {
		if t, ok := eventType(line); !ok || t != "turn.completed" {
			continue
		}
		var e struct {
			Usage json.RawMessage `json:"usage"`
		}
		if json.Unmarshal([]byte(line), &e) != nil || isAbsent(e.Usage) {
			return nil, nil
		}
		var t struct {
			InputTokens       int64 `json:"input_tokens"`
			CachedInputTokens int64 `json:"cached_input_tokens"`
			CacheWriteTokens  int64 `json:"cache_write_input_tokens"`
			OutputTokens      int64 `json:"output_tokens"` // reasoning_output_tokens among them
		}
		if err := json.Unmarshal(e.Usage, &t); err != nil {
			return nil, fmt.Errorf("turn.completed usage: %w", err)
		}
		cache := min(t.CachedInputTokens+t.CacheWriteTokens, t.InputTokens)
		return &planspec.Usage{InputTokens: t.InputTokens - cache, OutputTokens: t.OutputTokens, CacheTokens: cache}, nil
	}
	return nil, nil
}

// geminiStatsKey is the stats member of gemini's JSON output, which it indents
// by two spaces: a member at the top, never text inside the response (a JSON
// string holds no raw newline).
const geminiStatsKey = "\n  \"stats\": "

// geminiUsage reads the stats of `gemini --output-format json`: per model, its
// tokens (prompt, of which cached; candidates and thoughts are output). gemini
// names no cost. The stats come after the response: the tail holds them
// however long the answer.
func geminiUsage(exit core.Exit) (*planspec.Usage, error) {
	out := stdoutText(exit)
	i := strings.LastIndex(out, geminiStatsKey)
	if i < 0 {
		return nil, nil
	}
	var stats struct {
		Models map[string]struct {
			Tokens struct {
				Input      *int64 `json:"input"`
				Prompt     int64  `json:"prompt"`
				Candidates int64  `json:"candidates"`
				Cached     int64  `json:"cached"`
				Thoughts   int64  `json:"thoughts"`
				Total      int64  `json:"total"`
			} `json:"tokens"`
		} `json:"models"`
	}
	if err := json.NewDecoder(strings.NewReader(out[i+len(geminiStatsKey):])).Decode(&stats); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	if len(stats.Models) == 0 {
		return nil, nil
	}
	var u planspec.Usage
	top := int64(-1)
	for _, name := range slices.Sorted(mapKeysOf(stats.Models)) {
		t := stats.Models[name].Tokens
		in := t.Prompt - t.Cached
		if t.Input != nil {
			in = *t.Input
		}
		u.InputTokens += max(0, in)
		u.OutputTokens += t.Candidates + t.Thoughts
		u.CacheTokens += t.Cached
		if t.Total > top {
			u.Model, top = name, t.Total
		}
	}
	return &u, nil
}

// opencodeUsage sums the tokens and cost of every step_finish event of
// `opencode run --format json`, kept wherever they fell in the output
// (Exit.Lines): one per step of the agent's loop. Reasoning tokens are output.
func opencodeUsage(exit core.Exit) (*planspec.Usage, error) {
	events := exit.Lines
	if len(events) == 0 {
		for _, l := range lines(stdoutText(exit)) {
			if t, ok := eventType(l); ok && t == "step_finish" {
				events = append(events, l)
			}
		}
	}
	if len(events) > 0 && events[0] == "" {
		return nil, errors.New("too many step_finish events to count them all")
	}
	var total *planspec.Usage
	for _, line := range events {
		var e struct {
			Part struct {
				Cost   *float64 `json:"cost"`
				Tokens *struct {
					Input     int64 `json:"input"`
					Output    int64 `json:"output"`
					Reasoning int64 `json:"reasoning"`
					Cache     struct {
						Read  int64 `json:"read"`
						Write int64 `json:"write"`
					} `json:"cache"`
				} `json:"tokens"`
			} `json:"part"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			return nil, fmt.Errorf("step_finish: %w", err)
		}
		if e.Part.Tokens == nil {
			continue
		}
		t := e.Part.Tokens
		step := planspec.Usage{InputTokens: t.Input, OutputTokens: t.Output + t.Reasoning, CacheTokens: t.Cache.Read + t.Cache.Write, CostUSD: e.Part.Cost}
		if total == nil {
			total = &step
		} else {
			sum := total.Plus(step)
			total = &sum
		}
	}
	return total, nil
}

// UsageReported says what a preset's output tells of a try's spend: its
// tokens, and its cost. An agent given as a command, or a preset not read,
// tells neither: its worker may report them (stepseq report --cost).
func UsageReported(preset string) (tokens, cost bool) {
	switch preset {
	case "claude", "opencode":
		return true, true
	case "codex", "gemini":
		return true, false
	}
	return false, false
}
