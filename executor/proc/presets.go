package proc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/planspec"
)

// Preset is an agent CLI that stepseq knows by name (DESIGN §10): its command for
// one unattended try, and how it says that a try failed or that it cannot serve.
type Preset struct {
	Name string
	// Argv is the program and its flags, before any extra arguments and the prompt.
	Argv []string
	// PromptFlag is the flag whose value is the prompt (gemini -p); empty when the
	// prompt is the last positional argument.
	PromptFlag string
	// Help runs the CLI's own help, where every flag of Argv must appear; the
	// presets-check target compares them against the real CLIs.
	Help []string
	// ExitTellsNothing marks a CLI that exits 0 on errors (opencode): its output,
	// the required outputs and the reports decide, never the exit code alone.
	ExitTellsNothing bool
	// Resume is the argv of a retry that continues the agent's own session
	// (DESIGN §16), SessionPlaceholder standing for its id and ArgsPlaceholder,
	// when present, for the extra arguments (else they follow); nil when the CLI
	// cannot resume one unattended. ResumeHelp is the help that shows the words
	// from its subcommand on (codex exec resume --help); nil: Help shows them all.
	Resume     []string
	ResumeHelp []string

	judge func(core.Exit) (failed string, unavailable bool)
	// limit reads, in the words of a try the preset judged unavailable, when its
	// limit resets; ok is false when the words are no usage or rate limit.
	limit func(exit core.Exit, words string) (reset time.Time, ok bool)
	// session is the session id the CLI's output names; "" when none.
	session func(core.Exit) string
}

// SessionPlaceholder in a preset's Resume argv is replaced by the session id.
const SessionPlaceholder = "{session}"

// ArgsPlaceholder in a preset's Resume argv is where the extra arguments go.
const ArgsPlaceholder = "{args}"

// presets is the table of DESIGN §10, in its order.
var presets = []Preset{
	{Name: "claude", Argv: []string{"claude", "-p", "--output-format", "json", "--permission-mode", "acceptEdits"},
		Help: []string{"claude", "--help"}, judge: judgeClaude, limit: claudeLimit, session: jsonSession(`"session_id"`),
		Resume: []string{"claude", "-p", "--resume", SessionPlaceholder, "--output-format", "json", "--permission-mode", "acceptEdits"}},
	// codex exec resume takes exec's global flags after it, its sandbox flag only
	// before it.
	{Name: "codex", Argv: []string{"codex", "exec", "--json", "--skip-git-repo-check", "-s", "workspace-write"},
		Help: []string{"codex", "exec", "--help"}, judge: judgeCodex, limit: codexLimit, session: codexSession,
		Resume:     []string{"codex", "exec", "--json", "--skip-git-repo-check", "-s", "workspace-write", ArgsPlaceholder, "resume", SessionPlaceholder},
		ResumeHelp: []string{"codex", "exec", "resume", "--help"}},
	{Name: "gemini", Argv: []string{"gemini", "--output-format", "json", "--approval-mode", "yolo"}, PromptFlag: "-p",
		Help: []string{"gemini", "--help"}, judge: judgeGemini, limit: geminiLimit, session: jsonSession(`"session_id"`),
		Resume: []string{"gemini", "--resume", SessionPlaceholder, "--output-format", "json", "--approval-mode", "yolo"}},
	{Name: "aider", Argv: []string{"aider", "--yes-always", "--no-auto-commits"}, PromptFlag: "--message",
		Help: []string{"aider", "--help"}, limit: genericLimit},
	{Name: "opencode", Argv: []string{"opencode", "run", "--format", "json"},
		Help: []string{"opencode", "run", "--help"}, ExitTellsNothing: true, judge: judgeOpencode,
		limit: genericLimit, session: jsonSession(`"sessionID"`),
		Resume: []string{"opencode", "run", "--session", SessionPlaceholder, "--format", "json"}},
	{Name: "goose", Argv: []string{"goose", "run", "--no-session", "-q"}, PromptFlag: "-t",
		Help: []string{"goose", "run", "--help"}, limit: genericLimit},
	{Name: "openclaw", Argv: []string{"openclaw", "agent"}, PromptFlag: "--message",
		Help: []string{"openclaw", "agent", "--help"}, limit: genericLimit},
}

// Presets returns the preset table, in the order of DESIGN §10.
func Presets() []Preset { return slices.Clone(presets) }

// LookupPreset returns the preset called name.
func LookupPreset(name string) (Preset, bool) {
	i := slices.IndexFunc(presets, func(p Preset) bool { return p.Name == name })
	if i < 0 {
		return Preset{}, false
	}
	return presets[i], true
}

// Command is the preset's argv prefix with extra arguments: its own flags, args,
// then its prompt flag, so that Agent.Command appends the prompt last. When args
// place {prompt} themselves, the prompt flag is theirs to give.
func (p Preset) Command(args []string) []string {
	argv := append(slices.Clone(p.Argv), args...)
	if p.PromptFlag != "" && !slices.Contains(args, PromptPlaceholder) {
		argv = append(argv, p.PromptFlag)
	}
	return argv
}

// ResumeCommand is the argv prefix of a retry that continues session id, with
// extra args, laid out as Command lays out a fresh try's; nil when the preset
// cannot resume.
func (p Preset) ResumeCommand(id string, args []string) []string {
	if p.Resume == nil || id == "" {
		return nil
	}
	argv := make([]string, 0, len(p.Resume)+len(args)+1)
	placed := false
	for _, w := range p.Resume {
		switch w {
		case SessionPlaceholder:
			argv = append(argv, id)
		case ArgsPlaceholder:
			argv = append(argv, args...)
			placed = true
		default:
			argv = append(argv, w)
		}
	}
	if !placed {
		argv = append(argv, args...)
	}
	if p.PromptFlag != "" && !slices.Contains(args, PromptPlaceholder) {
		argv = append(argv, p.PromptFlag)
	}
	return argv
}

// Limited reads a finished try the way this CLI says it is out of quota, and
// when that ends (DESIGN §16). It is a limit only when the try could not serve
// (Judge's unavailable) and the words are a usage or rate limit, not a refused
// credential.
func (p Preset) Limited(exit core.Exit) (core.Limit, bool) {
	failed, unavailable := p.Judge(exit)
	if !unavailable || p.limit == nil || exit.TimedOut {
		return core.Limit{}, false
	}
	if _, _, start := judgeStart(exit); start {
		return core.Limit{}, false
	}
	// The CLI's own error, never the work of the try: an agent may well write
	// "rate limit" or "try again in 5 minutes" into its answer.
	words := failed + "\n" + stderrText(exit)
	reset, ok := p.limit(exit, words)
	if !ok {
		return core.Limit{}, false
	}
	text := failed
	if text == "" {
		text = p.Name + ": " + firstLine(stderrText(exit))
	}
	return core.Limit{Reset: reset, Text: core.FirstChars(text, core.ErrorChars)}, true
}

// Session is the session id the try's output names, for a retry that resumes
// it; "" when the CLI named none or the preset cannot resume.
func (p Preset) Session(exit core.Exit) string {
	if p.session == nil || p.Resume == nil {
		return ""
	}
	return p.session(exit)
}

// ResolvePreset is the argv prefix of preset name with extra args; an unknown
// name is a configuration error that suggests the closest preset.
func ResolvePreset(name string, args []string) ([]string, error) {
	p, ok := LookupPreset(name)
	if !ok {
		err := planspec.CheckPreset(name)
		if err == nil {
			err = fmt.Errorf("agent preset %q has no command", name)
		}
		return nil, &core.ConfigError{Msg: err.Error()}
	}
	return p.Command(args), nil
}

// Judge reads a finished try the way this CLI reports failure. failed, when not
// empty, fails the try with that error even on exit 0 (and replaces stderr as its
// error); unavailable says the agent could not serve at all (not found, auth, a
// rate or usage limit), so that the same try runs with the next fallback.
func (p Preset) Judge(exit core.Exit) (failed string, unavailable bool) {
	if failed, unavailable, ok := judgeStart(exit); ok {
		return failed, unavailable
	}
	if p.judge != nil {
		if failed, unavailable = p.judge(exit); failed != "" || unavailable {
			return failed, unavailable
		}
	}
	if exit.Code != 0 && !exit.TimedOut {
		if reason := unavailableReason(stderrText(exit)); reason != "" {
			return p.Name + ": " + reason + ": " + firstLine(stderrText(exit)), true
		}
	}
	return "", false
}

// judgeStart judges what every agent shares: a program that could not be started
// or that its wrapper could not find (126, 127) cannot serve.
func judgeStart(exit core.Exit) (failed string, unavailable, ok bool) {
	switch {
	case exit.Err != nil && (errors.Is(exit.Err, exec.ErrNotFound) || errors.Is(exit.Err, fs.ErrNotExist) || errors.Is(exit.Err, fs.ErrPermission)):
		return "agent could not start: " + exit.Err.Error(), true, true
	case exit.Err == nil && !exit.TimedOut && (exit.Code == 126 || exit.Code == 127):
		msg := firstLine(stderrText(exit))
		if msg == "" {
			msg = fmt.Sprintf("exit %d: command not found or not executable", exit.Code)
		}
		return "agent could not start: " + msg, true, true
	}
	return "", false, false
}

// unavailablePatterns are how the CLIs say they cannot serve: credentials missing or
// refused, a rate, usage or quota limit. They are looked for only in what the CLI
// reports as its own error, never in the work of a successful try. They are
// compiled on first use: every stepseq command links this package.
var unavailablePatterns = sync.OnceValue(func() []unavailablePattern {
	return []unavailablePattern{
		{regexp.MustCompile(`(?i)rate[ _-]?limit|usage[ _-]?limit|too many requests|\b429\b|quota|resource[ _]exhausted|exhausted your capacity|hit your [\w' -]{0,40}limit|out of (usage credits|extra usage)|limit reached|credit balance is too low|insufficient[ _]quota|overloaded`), "rate or usage limit"},
		{regexp.MustCompile(`(?i)invalid api key|api key not valid|incorrect api key|missing api key|no api key|run /login|please (run )?login|not logged in|log ?in required|unauthori[sz]ed|\b401\b|authentication[ _](failed|error|required)|auth method|oauth token (has )?expired|token could not be refreshed|permission[ _]denied: .*(key|credential)`), "authentication failed"},
	}
})

type unavailablePattern struct {
	re     *regexp.Regexp
	reason string
}

func unavailableReason(text string) string {
	for _, p := range unavailablePatterns() {
		if p.re.MatchString(text) {
			return p.reason
		}
	}
	return ""
}

// claudeResult is the last line of `claude -p --output-format json`.
type claudeResult struct {
	Type    string `json:"type"`
	Subtype string `json:"subtype"`
	IsError bool   `json:"is_error"`
	Result  string `json:"result"`
}

// judgeClaude fails a try whose JSON result says is_error: true, even on exit 0,
// with the result's text as the error.
func judgeClaude(exit core.Exit) (string, bool) {
	var r claudeResult
	found := false
	for _, line := range lastLines(stdoutText(exit)) {
		if t, ok := eventType(line); (!ok || t == "result") && json.Unmarshal([]byte(line), &r) == nil && r.Type == "result" {
			found = true
			break
		}
	}
	if !found {
		// A result too long for the tail: is_error and subtype come first in it.
		found = scanHead(exit.Stdout, &r)
	}
	if !found || !r.IsError {
		return "", false
	}
	msg := strings.TrimSpace(r.Result)
	if msg == "" && r.Subtype != "success" {
		msg = r.Subtype
	}
	if msg == "" {
		msg = "is_error: true"
	}
	return "claude: " + msg, unavailableReason(msg) != ""
}

// claudeLegacyLimit is claude 1.x's result for a usage limit, the reset's epoch
// after the bar (@anthropic-ai/claude-code 1.0.128: "Claude AI usage limit
// reached|<epoch>"). 2.x says "You've hit your 5-hour limit · resets 3pm
// (Europe/Paris)" (@anthropic-ai/claude-code-linux-x64 2.1.333), 1.x's newer
// words "Session limit reached ∙ resets 3pm"; both are read by statedReset.
var claudeLegacyLimit = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`Claude AI usage limit reached\|(\d{9,13})`)
})

// claudeRateLimitEvent is a line of claude's stream output (2.x, stream-json or
// verbose json): rate_limit_info.status "rejected" is a limit, resetsAt its end
// in epoch seconds; "allowed" and "allowed_warning" are not.
type claudeRateLimitEvent struct {
	Type string `json:"type"`
	Info struct {
		Status   string  `json:"status"`
		ResetsAt float64 `json:"resetsAt"`
	} `json:"rate_limit_info"`
}

// claudeLimit reads claude's usage limit and its reset: the legacy epoch, the
// stream's rate_limit_event, else the time its words name.
func claudeLimit(exit core.Exit, words string) (time.Time, bool) {
	if m := claudeLegacyLimit().FindStringSubmatch(words); m != nil {
		return epoch(m[1]), true
	}
	var reset time.Time
	rejected := false
	for _, out := range []string{exit.Stdout, stdoutText(exit)} {
		for _, line := range lines(out) {
			if t, ok := eventType(line); !ok || t != "rate_limit_event" {
				continue
			}
			var e claudeRateLimitEvent
			if json.Unmarshal([]byte(line), &e) == nil && e.Info.Status == "rejected" {
				rejected = true
				if e.Info.ResetsAt > 0 {
					reset = time.Unix(int64(e.Info.ResetsAt), 0)
				}
			}
		}
	}
	if !rejected && !rateWords(words) {
		return time.Time{}, false
	}
	if reset.IsZero() {
		reset = statedReset(words, exitTime(exit))
	}
	return reset, true
}

// epoch reads Unix seconds, or milliseconds when it is that long.
func epoch(s string) time.Time {
	n, _ := strconv.ParseInt(s, 10, 64)
	if n > 1e11 {
		return time.UnixMilli(n)
	}
	return time.Unix(n, 0)
}

// exitTime is when the try ended, from which a "try again in" counts.
func exitTime(exit core.Exit) time.Time {
	if exit.Ended.IsZero() {
		return time.Now()
	}
	return exit.Ended
}

// rateWords reports whether a CLI's error is a rate, usage or quota limit.
func rateWords(words string) bool {
	return unavailablePatterns()[0].re.MatchString(words)
}

// genericLimit reads a limit from the CLI's words alone, with the reset they name.
func genericLimit(exit core.Exit, words string) (time.Time, bool) {
	if !rateWords(words) {
		return time.Time{}, false
	}
	return statedReset(words, exitTime(exit)), true
}

// jsonSession reads the session id from a JSON member key ("session_id" in
// claude's result and gemini's JSON, "sessionID" in opencode's events): the last
// one the output names, on stdout, else on stderr (gemini prints its error JSON
// there).
func jsonSession(key string) func(core.Exit) string {
	re := sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(regexp.QuoteMeta(key) + `\s*:\s*"([A-Za-z0-9_.:-]{1,200})"`)
	})
	return func(exit core.Exit) string {
		for _, out := range []string{stdoutText(exit), exit.Stdout, stderrText(exit)} {
			if m := re().FindAllStringSubmatch(out, -1); m != nil {
				return m[len(m)-1][1]
			}
		}
		return ""
	}
}

// scanHead reads the leading members of a JSON object that may be cut short.
func scanHead(head string, r *claudeResult) bool {
	i := strings.Index(head, `{"type":"result"`)
	if i < 0 {
		return scanHeadTypeLast(head, r)
	}
	dec := json.NewDecoder(strings.NewReader(head[i:]))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			break
		}
		key, _ := t.(string)
		var v any
		if err := dec.Decode(&v); err != nil {
			if key == "result" {
				r.Result = cutString(head[i+int(dec.InputOffset()):]) + "…"
			}
			break
		}
		switch key {
		case "type":
			r.Type, _ = v.(string)
		case "subtype":
			r.Subtype, _ = v.(string)
		case "is_error":
			r.IsError, _ = v.(bool)
		case "result":
			r.Result, _ = v.(string)
		}
	}
	return r.Type == "result"
}

// cutString reads a JSON string cut short: `: "text…` without its closing quote.
func cutString(s string) string {
	s = strings.TrimLeft(s, " :")
	s = strings.TrimPrefix(s, `"`)
	for len(s) > 0 {
		var out string
		if json.Unmarshal([]byte(`"`+s+`"`), &out) == nil {
			return out
		}
		s = s[:len(s)-1] // a cut escape or rune at the end
	}
	return ""
}

// codexEvent is one line of `codex exec --json`.
type codexEvent struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Error   struct {
		Message string `json:"message"`
	} `json:"error"`
}

// judgeCodex fails a try whose event stream says the turn failed, with the
// failure's message. A stream error the turn recovered from is not a failure.
func judgeCodex(exit core.Exit) (string, bool) {
	var failed, lastError string
	completed := false
	for _, line := range lines(stdoutText(exit)) {
		// Most events are the agent's work; only three types are read.
		if t, ok := eventType(line); ok && t != "error" && t != "turn.failed" && t != "turn.completed" {
			continue
		}
		var e codexEvent
		if json.Unmarshal([]byte(line), &e) != nil {
			continue
		}
		switch e.Type {
		case "turn.failed":
			failed = e.Error.Message
		case "error":
			lastError = e.Message
		case "turn.completed":
			completed = true
			lastError = ""
		}
	}
	if failed == "" && lastError != "" && (exit.Code != 0 || !completed) {
		failed = lastError
	}
	if failed == "" {
		return "", false
	}
	return "codex: " + failed, unavailableReason(failed) != ""
}

// codexLimit reads codex's usage limit: "You've hit your usage limit. Try
// again at 3:45 PM." or "… or try again at Dec 3rd, 2026 3:45 PM." in local
// time (@openai/codex 0.171.0), "Please try again in 1.5s" from the API's rate
// limit, older codex's "try again in 2 hours 5 minutes".
func codexLimit(exit core.Exit, words string) (time.Time, bool) {
	return genericLimit(exit, words)
}

// codexSession is the thread id of codex's first event, thread.started: `codex
// exec resume ID` continues it.
func codexSession(exit core.Exit) string {
	for _, line := range lines(exit.Stdout) {
		if t, ok := eventType(line); !ok || t != "thread.started" {
			continue
		}
		var e struct {
			ThreadID string `json:"thread_id"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.ThreadID != "" {
			return e.ThreadID
		}
	}
	return ""
}

// geminiLimit reads gemini's quota errors (@google/gemini-cli 0.61.0): a 429 or
// RESOURCE_EXHAUSTED, TerminalQuotaError or RetryableQuotaError, with "Please
// retry in 34.5s", "Suggested retry after 60s", "Your quota will reset after
// 3h12m5s", or the API's RetryInfo "retryDelay": "34s"; "You have exhausted
// your daily quota on this model." names no time.
func geminiLimit(exit core.Exit, words string) (time.Time, bool) {
	if !rateWords(words) && !strings.Contains(words, "QuotaError") {
		return time.Time{}, false
	}
	now := exitTime(exit)
	if t := statedReset(words, now); !t.IsZero() {
		return t, true
	}
	if m := geminiRetryDelay().FindStringSubmatch(words + "\n" + stdoutText(exit)); m != nil {
		if d, err := time.ParseDuration(m[1]); err == nil && d > 0 {
			return now.Add(d), true
		}
	}
	return time.Time{}, true
}

var geminiRetryDelay = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`"retryDelay"\s*:\s*"(\d+(?:\.\d+)?s)"`)
})

// geminiExits are gemini-cli's exit codes for fatal errors (its FatalError classes).
var geminiExits = map[int]string{
	41:  "authentication failed",
	42:  "invalid input",
	44:  "sandbox error",
	52:  "configuration error",
	53:  "turn limit reached",
	54:  "tool execution failed",
	130: "cancelled",
}

// judgeGemini names the meaning of gemini's exit code, with the message of the
// JSON error it prints; exit 41 (authentication) and quota errors are unavailable.
func judgeGemini(exit core.Exit) (string, bool) {
	var out struct {
		Error *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	msg := ""
	// The JSON error is on stdout, or on stderr where gemini 0.61 prints it.
	for _, s := range []string{stdoutText(exit), stderrText(exit)} {
		if json.Unmarshal([]byte(jsonObject(s)), &out) == nil && out.Error != nil {
			msg = out.Error.Message
			break
		}
	}
	if msg == "" && exit.Code != 0 {
		msg = firstLine(stderrText(exit))
	}
	meaning, known := geminiExits[exit.Code]
	switch {
	case known:
		failed := fmt.Sprintf("gemini: %s (exit %d)", meaning, exit.Code)
		if msg != "" {
			failed += ": " + msg
		}
		return failed, exit.Code == 41 || unavailableReason(msg) != ""
	case msg != "" && (exit.Code != 0 || out.Error != nil):
		// A quota error's status (429, RESOURCE_EXHAUSTED) may be beside its message.
		return "gemini: " + msg, unavailableReason(msg) != "" || exit.Code != 0 && unavailableReason(stderrText(exit)) != ""
	}
	return "", false
}

// opencodeEvent is one line of `opencode run --format json`.
type opencodeEvent struct {
	Type  string `json:"type"`
	Error struct {
		Name string `json:"name"`
		Data struct {
			Message string `json:"message"`
		} `json:"data"`
	} `json:"error"`
}

// judgeOpencode fails a try whose events hold an error, or that printed nothing but
// an error on stderr: opencode exits 0 either way.
func judgeOpencode(exit core.Exit) (string, bool) {
	for _, line := range lastLines(stdoutText(exit)) {
		var e opencodeEvent
		if t, ok := eventType(line); ok && t != "error" || json.Unmarshal([]byte(line), &e) != nil || e.Type != "error" {
			continue
		}
		msg := e.Error.Data.Message
		switch {
		case msg == "":
			msg = e.Error.Name
		case e.Error.Name != "":
			msg = e.Error.Name + ": " + msg
		}
		if msg == "" {
			msg = "error event"
		}
		return "opencode: " + msg, unavailableReason(msg) != "" || strings.Contains(e.Error.Name, "Auth")
	}
	if strings.TrimSpace(stdoutText(exit)) == "" && opencodeError().MatchString(stderrText(exit)) {
		msg := opencodeError().FindString(stderrText(exit))
		return "opencode: " + msg, unavailableReason(stderrText(exit)) != ""
	}
	return "", false
}

// opencodeError is the line opencode prints on stderr for an error it exits 0 on,
// such as "NotFoundError: Session not found". Compiled on first use.
var opencodeError = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?m)^\s*(Error|[A-Z][A-Za-z]*Error):.*$`)
})

// stdoutText is what is kept of stdout for judging: the tail, which holds the
// whole output when it was short.
func stdoutText(exit core.Exit) string {
	if exit.StdoutTail != "" {
		return exit.StdoutTail
	}
	return exit.Stdout
}

func stderrText(exit core.Exit) string {
	if exit.StderrTail != "" {
		return exit.StderrTail
	}
	return exit.Stderr
}

// eventType reads the type of a JSON event line that starts with it, as these CLIs
// Write them, without decoding the line; ok is false when the line is not so.
func eventType(line string) (string, bool) {
	rest, ok := strings.CutPrefix(line, `{"type":"`)
	if !ok {
		return "", false
	}
	t, _, ok := strings.Cut(rest, `"`)
	return t, ok
}

// Lines splits s into its non-empty lines. A first line cut by the tail capture
// simply does not parse.
func lines(s string) []string {
	var out []string
	for l := range strings.Lines(s) {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// lastLines is lines, last first: CLIs end with their verdict.
func lastLines(s string) []string {
	out := lines(s)
	slices.Reverse(out)
	return out
}

// jsonObject is the last top-level JSON object in s: gemini prints one, indented.
func jsonObject(s string) string {
	s = strings.TrimSpace(s)
	if !strings.HasSuffix(s, "}") {
		return ""
	}
	for i := strings.LastIndex(s, "\n{"); ; i = strings.LastIndex(s[:i], "\n{") {
		start := i + 1
		if i < 0 {
			start = 0
		}
		if strings.HasPrefix(s[start:], "{") && json.Valid([]byte(s[start:])) {
			return s[start:]
		}
		if i < 0 {
			return ""
		}
	}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return core.FirstChars(strings.TrimSpace(s), core.ErrorChars)
}
