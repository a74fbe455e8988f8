package planspec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Phases of a step run, kept beside the original's status words in
// stepRuns[id].phase. Nobody is told a step is in progress before its worker said so.
const (
	PhasePlanned     = "planned"     // queued, not started
	PhaseDispatching = "dispatching" // agent launched or offered; no accepted report yet
	PhaseInProgress  = "in_progress" // the worker accepted and began
	PhaseBlocked     = "blocked"     // cannot go on without someone
	PhaseReviewing   = "reviewing"   // the worker says done; stepseq verifies
	PhaseDone        = "done"        // verified
	// PhaseWaiting: every agent of the try is out of quota; the same try runs
	// again when the limit resets.
	PhaseWaiting = "waiting"
)

// Report statuses a worker sends.
const (
	ReportAccepted  = "accepted"
	ReportMilestone = "milestone"
	ReportBlocked   = "blocked"
	ReportDone      = "done"
)

// Reports modes of a plan or step.
const (
	ReportsOptional = "optional"
	ReportsRequired = "required"
)

// MaxReportSize caps a report file: a report is a few lines.
const MaxReportSize = 64 << 10

// MaxReportsKept bounds stepRuns[id].reports: the newest are kept.
const MaxReportsKept = 20

// RiskLevels are the words a report's risk starts with.
var RiskLevels = []string{"none", "low", "medium", "high"}

// ReportStatuses are the words a report's status takes, in a try's order.
func ReportStatuses() []string { return Texts(reportStatusWords) }

// reportFields are the seed's five required fields, in its order.
var reportFields = []string{"status", "summary", "evidence", "risk", "next"}

// WorkerReport is a worker's report in the seed's block: five required fields
// and two optional ones.
type WorkerReport struct {
	Status    string          `json:"status"`
	Summary   string          `json:"summary"`
	Evidence  string          `json:"evidence"`
	Risk      string          `json:"risk"`
	Next      string          `json:"next"`
	Artifacts []string        `json:"artifacts,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	// Usage is what the worker says the try spent, {inputTokens, outputTokens,
	// cacheTokens, costUsd, model}, as it wrote it: one that does not read is
	// ignored with a journal line, never a refused report (StatedUsage).
	Usage json.RawMessage `json:"usage,omitempty"`
}

// StatedUsage is the usage the report states; nil and no error when it states
// none.
func (rep WorkerReport) StatedUsage() (*Usage, error) {
	if len(rep.Usage) == 0 || string(rep.Usage) == "null" {
		return nil, nil
	}
	return ParseUsage(rep.Usage)
}

// ReportRecord is an accepted report as stepRuns[id].reports keeps it.
type ReportRecord struct {
	Time string `json:"time"`
	Try  int    `json:"try"`
	Via  string `json:"via,omitempty"` // file, cli, mcp
	WorkerReport
}

// ParseReport reads a report in any of the forms a worker writes: the seed's plain
// block (`status: done` lines, values taken verbatim to the end of the line), YAML,
// or JSON. name is used in messages. It checks the form only; Problems checks the
// content.
func ParseReport(r io.Reader, name string) (WorkerReport, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxReportSize+1))
	if err != nil {
		return WorkerReport{}, fmt.Errorf("read report %s: %w", name, err)
	}
	if len(data) > MaxReportSize {
		return WorkerReport{}, fmt.Errorf("%s: larger than %d KiB: a report is a few lines", name, MaxReportSize>>10)
	}
	if !utf8.Valid(data) {
		at := 0
		for at < len(data) {
			r, w := utf8.DecodeRune(data[at:])
			if r == utf8.RuneError && w <= 1 {
				break
			}
			at += w
		}
		return WorkerReport{}, fmt.Errorf("%s: not UTF-8 text (a bad byte 0x%02x at offset %d): write the report as UTF-8", name, data[at], at)
	}
	text := bytes.TrimSpace(data)
	if len(text) == 0 {
		return WorkerReport{}, fmt.Errorf("%s: empty report: want the block status, summary, evidence, risk, next", name)
	}
	if text[0] == '{' {
		var rep WorkerReport
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rep); err != nil {
			return WorkerReport{}, fmt.Errorf("%s: not a valid JSON report: %v", name, err)
		}
		return rep, nil
	}
	// The plain block first: it is what the seed writes, and a value such as
	// "wrote a.md: 3 sections" is not valid YAML.
	if rep, ok := plainBlock(string(text)); ok {
		return rep, nil
	}
	var raw map[string]any
	if err := yaml.Unmarshal(text, &raw); err != nil {
		return WorkerReport{}, fmt.Errorf("%s: not a report block: %v; write one `key: value` line for each of status, summary, evidence, risk and next", name, err)
	}
	return fromMap(raw, name)
}

// plainBlock reads `key: value` lines. It declines text with lines it cannot place,
// so that YAML with nesting is read as YAML.
func plainBlock(text string) (WorkerReport, bool) {
	var rep WorkerReport
	seen := map[string]bool{}
	last := ""
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimRight(line, "\r")
		trimmed := strings.TrimSpace(line)
		if notReportLine(trimmed) {
			continue
		}
		if last == "artifacts" && strings.HasPrefix(trimmed, "- ") {
			rep.Artifacts = append(rep.Artifacts, unquote(strings.TrimSpace(trimmed[2:])))
			continue
		}
		key, val, ok := strings.Cut(trimmed, ":")
		key = strings.ToLower(strings.TrimSpace(key))
		if !ok || line != strings.TrimLeft(line, " \t") || seen[key] {
			return WorkerReport{}, false
		}
		seen[key] = true
		last = key
		if !rep.setPlain(key, strings.TrimSpace(val)) {
			return WorkerReport{}, false
		}
	}
	return rep, len(seen) > 0
}

// notReportLine is a line a block may hold around its keys: blank, a comment,
// a YAML document marker, a code fence.
func notReportLine(trimmed string) bool {
	return trimmed == "" || strings.HasPrefix(trimmed, "#") || trimmed == "---" || strings.HasPrefix(trimmed, "```")
}

// setPlain sets the report's key from a plain block's value; false when the key
// is none of a report's, or its value is one plain lines cannot hold.
func (rep *WorkerReport) setPlain(key, val string) bool {
	switch key {
	case "status":
		rep.Status = strings.ToLower(unquote(val))
	case "summary":
		rep.Summary = unquote(val)
	case "evidence":
		rep.Evidence = unquote(val)
	case "risk":
		rep.Risk = unquote(val)
	case "next":
		rep.Next = unquote(val)
	case "artifacts":
		list, ok := plainList(val)
		rep.Artifacts = append(rep.Artifacts, list...)
		return ok
	case "usage":
		if val == "" {
			return false // a nested usage: YAML reads it
		}
		var v any
		if yaml.Unmarshal([]byte(val), &v) != nil {
			v = val
		}
		rep.Usage, _ = json.Marshal(v)
	case "result":
		if val == "" {
			return false // a nested result: YAML reads it
		}
		var v any
		if yaml.Unmarshal([]byte(val), &v) != nil {
			v = val
		}
		rep.Result, _ = json.Marshal(v)
	default:
		return false
	}
	return true
}

// plainList is an artifacts value: a flow list, or names separated by commas;
// none when empty (a "- name" line per artifact follows).
func plainList(val string) ([]string, bool) {
	if strings.HasPrefix(val, "[") {
		var list []string
		if yaml.Unmarshal([]byte(val), &list) != nil {
			return nil, false
		}
		return list, true
	}
	var list []string
	for p := range strings.SplitSeq(val, ",") {
		if p = strings.TrimSpace(p); p != "" {
			list = append(list, p)
		}
	}
	return list, true
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' && s[len(s)-1] == '"' || s[0] == '\'' && s[len(s)-1] == '\'') {
		return s[1 : len(s)-1]
	}
	return s
}

func fromMap(raw map[string]any, name string) (WorkerReport, error) {
	var rep WorkerReport
	var errs []string
	str := func(k string) string {
		v, ok := raw[k]
		if !ok || v == nil {
			return ""
		}
		if s, ok := v.(string); ok {
			return s
		}
		errs = append(errs, fmt.Sprintf("%s: want text, got %v", k, v))
		return ""
	}
	for k := range raw {
		if !slices.Contains(reportFields, k) && k != "artifacts" && k != "result" && k != "usage" {
			errs = append(errs, fmt.Sprintf("unknown field %q: a report has status, summary, evidence, risk, next, and optionally artifacts, result and usage", k))
		}
	}
	rep.Status, rep.Summary, rep.Evidence = strings.ToLower(str("status")), str("summary"), str("evidence")
	rep.Risk, rep.Next = str("risk"), str("next")
	switch a := raw["artifacts"].(type) {
	case nil:
	case []any:
		for _, v := range a {
			s, ok := v.(string)
			if !ok {
				errs = append(errs, fmt.Sprintf("artifacts: want workspace paths, got %v", v))
				continue
			}
			rep.Artifacts = append(rep.Artifacts, s)
		}
	default:
		errs = append(errs, "artifacts: want a list of workspace paths")
	}
	if v, ok := raw["result"]; ok {
		b, err := json.Marshal(v)
		if err != nil {
			errs = append(errs, fmt.Sprintf("result: %v", err))
		}
		rep.Result = b
	}
	if v, ok := raw["usage"]; ok && v != nil {
		// A usage that does not encode is left out: it never refuses a report.
		rep.Usage, _ = json.Marshal(v)
	}
	if len(errs) > 0 {
		return WorkerReport{}, fmt.Errorf("%s: %s", name, strings.Join(errs, "; "))
	}
	return rep, nil
}

// Problems lists every reason the report's content is refused, whatever the step's
// phase: a missing field, an unknown status, a risk that does not start with a
// level, an artifact path that leaves the workspace.
func (r WorkerReport) Problems() []string {
	var out []string
	vals := map[string]string{"status": r.Status, "summary": r.Summary, "evidence": r.Evidence, "risk": r.Risk, "next": r.Next}
	for _, f := range reportFields {
		switch {
		case strings.TrimSpace(vals[f]) == "":
			out = append(out, fmt.Sprintf("missing %s: %s", f, fieldHint[f]))
		case !utf8.ValidString(vals[f]):
			out = append(out, fmt.Sprintf("%s: not UTF-8 text: write it as UTF-8", f))
		}
	}
	if r.Status != "" {
		if err := CheckWord(r.Status, reportStatusWords); err != nil {
			out = append(out, fmt.Sprintf("status: %v", err))
		}
	}
	if strings.TrimSpace(r.Risk) != "" && RiskLevel(r.Risk) == "" {
		out = append(out, fmt.Sprintf("risk %q: start with none, low, medium or high, then the reason, like \"low — only docs changed\"", r.Risk))
	}
	for _, a := range r.Artifacts {
		if err := CheckPath(a); err != nil {
			out = append(out, fmt.Sprintf("artifact %q: %v", Clip(a, 80), err))
		}
	}
	// Any channel, the same cap as a report file: kept in stepRuns[id].reports, a
	// report of a megabyte would make a state too large to read back.
	if n := r.size(); n > MaxReportSize {
		out = append(out, fmt.Sprintf("%d KiB is over the %d KiB cap for a report: a report is a few lines; point at files for the rest", n>>10, MaxReportSize>>10))
	}
	return out
}

// size is about what the report weighs in a state: its text, paths and result.
func (r WorkerReport) size() int {
	n := len(r.Status) + len(r.Summary) + len(r.Evidence) + len(r.Risk) + len(r.Next) + len(r.Result)
	for _, a := range r.Artifacts {
		n += len(a)
	}
	return n
}

var fieldHint = map[string]string{
	"status":   "accepted, milestone, blocked or done",
	"summary":  "one sentence",
	"evidence": "the first action, an artifact, the specific error, or the final artifact",
	"risk":     "none, low, medium or high, then the reason",
	"next":     `what comes next ("none" when done)`,
}

// RiskLevel is the level a risk starts with, or "" when it starts with none of them.
func RiskLevel(risk string) string {
	s := strings.ToLower(strings.TrimSpace(risk))
	for _, l := range RiskLevels {
		if s == l {
			return l
		}
		if rest, ok := strings.CutPrefix(s, l); ok && rest != "" && !isIDChar(rest[0]) {
			return l
		}
	}
	return ""
}

func isIDChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'
}

// Block writes the report as the seed's plain block, the form `stepseq report`
// drops in the report folder.
func (r WorkerReport) Block() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "status: %s\nsummary: %s\nevidence: %s\nrisk: %s\nnext: %s\n",
		oneLine(r.Status), oneLine(r.Summary), oneLine(r.Evidence), oneLine(r.Risk), oneLine(r.Next))
	if len(r.Artifacts) > 0 {
		b.WriteString("artifacts:\n")
		for _, a := range r.Artifacts {
			fmt.Fprintf(&b, "  - %s\n", oneLine(a))
		}
	}
	if len(r.Result) > 0 {
		fmt.Fprintf(&b, "result: %s\n", r.Result)
	}
	return b.Bytes()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// ReportsMode is how step id takes reports: the step's setting, else the plan's,
// else optional.
func (s *State) ReportsMode(id string) string {
	if s.IsPull(id) {
		return ReportsRequired // a pulled step ends only with its worker's done report
	}
	if sp := s.Steps[id]; sp != nil && sp.Reports != "" {
		return sp.Reports
	}
	if s.Settings.Reports != "" {
		return s.Settings.Reports
	}
	return ReportsOptional
}

// UsesReports reports whether the plan or step id says anything about reports: such
// a plan's status shows phases as they are, where a plan without reports shows
// "running" for a dispatched step.
func (s *State) UsesReports(id string) bool {
	if s.IsPull(id) {
		return true
	}
	if sp := s.Steps[id]; sp != nil && sp.Reports != "" {
		return true
	}
	return s.Settings.Reports != "" || s.IsPull(id)
}
