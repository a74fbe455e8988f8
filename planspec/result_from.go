package planspec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// Where a step's result comes from when its agent reports nothing:
// `resultFrom: output`, the agent's final message; `resultFrom: file:PATH`, a
// workspace file holding JSON or YAML. A done report's result, through any
// channel, wins over both.

// ResultFrom words.
const (
	ResultFromOutput = "output"
	ResultFromFile   = "file:"
)

// MaxResultSize caps a result read from an agent's output or a file: a
// report's cap, so that a result costs the state what a reported one does.
const MaxResultSize = MaxReportSize

// MaxResultOutput is how much of the end of stdout is kept, for a step whose
// result is its output, to find the final message in: claude's JSON result
// holds the whole answer on one line.
const MaxResultOutput = 16 << 20

// CheckResultFrom returns nil for output or file:PATH with PATH inside the
// workspace, else an error saying what is wanted.
func CheckResultFrom(s string) error {
	if s == ResultFromOutput {
		return nil
	}
	p, ok := strings.CutPrefix(s, ResultFromFile)
	if !ok {
		return fmt.Errorf("resultFrom: want output (the agent's final message) or file:PATH (a JSON or YAML file in the workspace), got %q", Clip(s, 60))
	}
	if err := CheckPath(p); err != nil {
		return fmt.Errorf("resultFrom: %v", err)
	}
	return nil
}

// ResultFromFile is the workspace path of step id's result file; "" when its
// result does not come from a file.
func (s *State) ResultFromFile(id string) string {
	if sp := s.Steps[id]; sp != nil {
		if p, ok := strings.CutPrefix(sp.ResultFrom, ResultFromFile); ok {
			return p
		}
	}
	return ""
}

// ResultFromOutput reports whether step id's result is its agent's final message.
func (s *State) ResultFromOutput(id string) bool {
	sp := s.Steps[id]
	return sp != nil && sp.ResultFrom == ResultFromOutput
}

// ParseResultFile reads a result file: JSON, else YAML (a mapping's keys must
// be strings). name is for messages. The result is compact JSON.
func ParseResultFile(data []byte, name string) (json.RawMessage, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%s is empty: want the result as JSON or YAML", name)
	}
	if json.Valid(data) {
		return compactResult(data)
	}
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("%s is neither JSON nor YAML: %v", name, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	j, err := jsonCompatible(v, "")
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	b, err := json.Marshal(j)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return compactResult(b)
}

// jsonCompatible turns what yaml.v3 decodes into values JSON can hold.
func jsonCompatible(v any, at string) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			c, err := jsonCompatible(e, at+"/"+k)
			if err != nil {
				return nil, err
			}
			v[k] = c
		}
		return v, nil
	case map[any]any:
		return nil, fmt.Errorf("%s: a mapping whose keys are not all strings: JSON cannot hold it", orRoot(at))
	case []any:
		for i, e := range v {
			c, err := jsonCompatible(e, fmt.Sprintf("%s/%d", at, i))
			if err != nil {
				return nil, err
			}
			v[i] = c
		}
		return v, nil
	}
	return v, nil
}

func orRoot(at string) string {
	if at == "" {
		return "/"
	}
	return at
}

// LastJSON finds the JSON value a text ends with: the whole text when it is
// one; else the last fenced code block (```json … ```) when it holds one; else
// the last object or array that starts a line and runs to the end; else the
// last line from its first { or [. ok is false when there is none. It reads an
// agent's final message and a plain command's stdout alike.
func LastJSON(text string) (json.RawMessage, bool) {
	s := strings.TrimSpace(text)
	if s == "" {
		return nil, false
	}
	if s[len(s)-1] != '}' && s[len(s)-1] != ']' {
		if body, ok := lastFence(s); ok {
			return LastJSON(body)
		}
		if json.Valid([]byte(s)) { // a number, a string, true
			return json.RawMessage(s), true
		}
		return nil, false
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s), true
	}
	// An object or array that starts a line and runs to the end, tried from
	// the last line start up, at most maxJSONStarts of them: a value that
	// closes early fails its check at once, and the bound keeps a text of
	// many unclosed brackets from costing a scan of its tail per line.
	tried := 0
	for end := len(s); end > 0 && tried < maxJSONStarts; {
		i := strings.LastIndexByte(s[:end], '\n')
		tail := s[i+1:]
		if len(tail) > 0 && (tail[0] == '{' || tail[0] == '[') {
			tried++
			if json.Valid([]byte(tail)) {
				return json.RawMessage(tail), true
			}
		}
		if i < 0 {
			break
		}
		end = i
	}
	last := s[strings.LastIndexByte(s, '\n')+1:]
	if i := strings.IndexAny(last, "{["); i > 0 && json.Valid([]byte(last[i:])) {
		return json.RawMessage(last[i:]), true
	}
	return nil, false
}

// maxJSONStarts bounds the line starts LastJSON tries.
const maxJSONStarts = 64

// lastFence is the body of the text's last fenced code block when the text
// ends with it (or with a line after it).
func lastFence(s string) (string, bool) {
	end := strings.LastIndex(s, "```")
	if end < 0 {
		return "", false
	}
	start := strings.LastIndex(s[:end], "```")
	if start < 0 {
		return "", false
	}
	body := s[start+3 : end]
	if nl := strings.IndexByte(body, '\n'); nl >= 0 && !strings.ContainsAny(strings.TrimSpace(body[:nl]), "{[") {
		body = body[nl+1:] // the info string: json, yaml, …
	}
	return body, true
}

// CheckResultSize refuses a result over MaxResultSize, with what it is.
func CheckResultSize(raw json.RawMessage, what string) error {
	if len(raw) > MaxResultSize {
		return fmt.Errorf("%s: the result is %d bytes, over the %d KiB a result may hold: keep large data in files the result names", what, len(raw), MaxResultSize>>10)
	}
	return nil
}

func compactResult(b []byte) (json.RawMessage, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
