package proc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// A step's result from its agent's output (resultFrom: output): the
// agent's final message, read the way its preset reads its output, and the JSON
// value that message holds; for a command given as a list, the last JSON value
// on stdout.

// ResultCap bounds a result file (resultFrom: file:PATH): a report's cap.
var ResultCap = store.Cap{Bytes: planspec.MaxResultSize, What: "a result",
	Hint: "a result is a few kilobytes; keep large data in files the result names"}

// finalMessages read a preset's final message from its output. ok is false
// when the output holds none; a preset not listed prints its answer as text.
var finalMessages = map[string]func(stdout string) (string, bool){
	"claude":   claudeFinal,
	"codex":    codexFinal,
	"gemini":   geminiFinal,
	"opencode": opencodeFinal,
}

// OutputResult is the result a finished try's output gives: the JSON value of
// the agent's final message, or, when that message holds none, the message as
// a JSON string; for a command given as a list (or a preset whose CLI prints
// plain text), the last JSON value on stdout. The error says why there is none.
func (a Agent) OutputResult(exit core.Exit) (json.RawMessage, error) {
	stdout := stdoutText(exit)
	final, known := finalMessages[a.Preset]
	if !known {
		raw, ok := planspec.LastJSON(stdout)
		if !ok {
			return nil, errors.New("no JSON value on the agent's stdout: end the output with the result as JSON")
		}
		return compactChecked(raw)
	}
	msg, ok := final(stdout)
	if !ok {
		return nil, fmt.Errorf("no final message in %s's output (%s)", a.Preset, describeOutput(stdout))
	}
	if raw, ok := planspec.LastJSON(msg); ok {
		return compactChecked(raw)
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	return compactChecked(b)
}

// compactChecked is raw as the state keeps a result: compact, and within the
// result cap.
func compactChecked(raw json.RawMessage) (json.RawMessage, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, err
	}
	if err := planspec.CheckResultSize(b.Bytes(), "output"); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func describeOutput(stdout string) string {
	switch s := strings.TrimSpace(stdout); {
	case s == "":
		return "stdout was empty"
	case len(stdout) >= planspec.MaxResultOutput:
		return fmt.Sprintf("only the last %d MiB of stdout are kept", planspec.MaxResultOutput>>20)
	default:
		return "stdout ends: " + core.FirstChars(s[max(0, len(s)-120):], 120)
	}
}

// claudeFinal is the result member of claude's JSON result (`claude -p
// --output-format json`), the last such line; stream-json ends with the same.
func claudeFinal(stdout string) (string, bool) {
	for _, line := range lastLines(stdout) {
		if t, ok := eventType(line); ok && t != "result" {
			continue
		}
		var r claudeResult
		if json.Unmarshal([]byte(line), &r) == nil && r.Type == "result" && !r.IsError {
			return r.Result, true
		}
	}
	var r claudeResult
	if obj := jsonObject(stdout); obj != "" && json.Unmarshal([]byte(obj), &r) == nil && r.Type == "result" && !r.IsError {
		return r.Result, true
	}
	return "", false
}

// codexFinal is the text of the last agent message of `codex exec --json`:
// item.completed with an agent_message item (older CLIs: assistant_message).
func codexFinal(stdout string) (string, bool) {
	for _, line := range lastLines(stdout) {
		if t, ok := eventType(line); ok && t != "item.completed" {
			continue
		}
		var e struct {
			Type string `json:"type"`
			Item struct {
				Type     string `json:"type"`
				ItemType string `json:"item_type"`
				Text     string `json:"text"`
			} `json:"item"`
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Type != "item.completed" {
			continue
		}
		if e.Item.Type == "agent_message" || e.Item.ItemType == "assistant_message" {
			return e.Item.Text, true
		}
	}
	return "", false
}

// geminiFinal is the response member of `gemini --output-format json`'s object.
func geminiFinal(stdout string) (string, bool) {
	var out struct {
		Response *string `json:"response"`
	}
	obj := jsonObject(stdout)
	if obj == "" || json.Unmarshal([]byte(obj), &out) != nil || out.Response == nil {
		return "", false
	}
	return *out.Response, true
}

// opencodeFinal is the last text part of `opencode run --format json`'s events:
// the text of the assistant's last step.
func opencodeFinal(stdout string) (string, bool) {
	for _, line := range lastLines(stdout) {
		if t, ok := eventType(line); ok && t != "text" {
			continue
		}
		var e struct {
			Type string `json:"type"`
			Part struct {
				Text string `json:"text"`
			} `json:"part"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Type == "text" {
			return e.Part.Text, true
		}
	}
	return "", false
}

// ExitResult is what an exited try's output gives for a step with resultFrom:
// output; nothing for another step.
func ExitResult(st *planspec.State, id string, agent Agent, exit core.Exit) (json.RawMessage, string) {
	if st == nil || !st.ResultFromOutput(id) {
		return nil, ""
	}
	if st.IsPull(id) {
		return nil, "a pulled step (agent: mcp) has no output: report the result with step_report, or write it to a file and use resultFrom: file:PATH"
	}
	raw, err := agent.OutputResult(exit)
	if err != nil {
		return nil, err.Error()
	}
	return raw, ""
}
