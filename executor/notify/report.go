package notify

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stepseq/stepseq/planspec"
)

// Notice is what the user hears about one transition: the main agent's format
// of the workflow protocol (status, output, next) and where it happened.
type Notice struct {
	// ID is unique and stable: the same report delivered twice has the same ID, and
	// IDs of one workspace sort in the order the reports were emitted.
	ID     string    `json:"id"`
	Time   time.Time `json:"time"`
	Plan   string    `json:"plan"`
	Step   string    `json:"step"`   // empty for a report on the whole plan
	Try    int       `json:"try"`    // 0 for a report on the whole plan
	Who    string    `json:"who"`    // who speaks: the agent, a worker, stepseq
	Status string    `json:"status"` // the seed's words: dispatching, in_progress, milestone, blocked, done, heartbeat
	// Event says what happened beyond the status word (try_failed, retrying,
	// timeout, plan_done, plan_blocked, waiting_limit…).
	Event  string `json:"event,omitempty"`
	Output string `json:"output"` // the summary, evidence or error
	Next   string `json:"next"`   // what comes next ("none" when done)
	// Run names the run; empty for the workspace's own, state.json.
	Run string `json:"run,omitempty"`
	// Summary is what the plan's summary gave, on the plan's last
	// report (event plan_done or plan_blocked).
	Summary map[string]any `json:"summary,omitempty"`
	// Spend is what the run's agents spent so far; absent before its first try.
	Spend *planspec.Spend `json:"spend,omitempty"`
}

// Caps on a report's fields, in bytes, applied by Emit. A longer value is cut on a
// character boundary and ends with "…".
const (
	MaxOutputBytes = 8 << 10
	MaxNextBytes   = 2 << 10
	MaxFieldBytes  = 512 // plan, step, who, status, event
)

// capped returns r with every string field within its cap.
func (r Notice) capped() Notice {
	r.Plan = cut(r.Plan, MaxFieldBytes)
	r.Step = cut(r.Step, MaxFieldBytes)
	r.Who = cut(r.Who, MaxFieldBytes)
	r.Status = cut(r.Status, MaxFieldBytes)
	r.Event = cut(r.Event, MaxFieldBytes)
	r.Output = cut(r.Output, MaxOutputBytes)
	r.Next = cut(r.Next, MaxNextBytes)
	r.Summary = cappedSummary(r.Summary)
	return r
}

// cappedSummary keeps a summary whose JSON is within MaxOutputBytes; a longer
// one keeps its names, each value as its JSON cut to MaxFieldBytes.
func cappedSummary(s map[string]any) map[string]any {
	if len(s) == 0 {
		return nil
	}
	if b, err := json.Marshal(s); err == nil && len(b) <= MaxOutputBytes {
		return s
	}
	out := make(map[string]any, len(s))
	for k, v := range s {
		b, _ := json.Marshal(v)
		out[cut(k, MaxFieldBytes)] = cut(string(b), MaxFieldBytes)
	}
	return out
}

// cut shortens s to at most max bytes of valid UTF-8, marking the cut.
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const mark = "…"
	i := max - len(mark)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	s = s[:i]
	return s + mark
}

// env is the report as STEPSEQ_NOTIFY_* variables for a command sink. Output is
// cut shorter than in the JSON: the environment is not the place for long text.
func (r Notice) env() []string {
	vars := []string{
		"STEPSEQ_NOTIFY_ID=" + r.ID,
		"STEPSEQ_NOTIFY_TIME=" + r.Time.UTC().Format(time.RFC3339Nano),
		"STEPSEQ_NOTIFY_PLAN=" + r.Plan,
		"STEPSEQ_NOTIFY_STEP=" + r.Step,
		"STEPSEQ_NOTIFY_TRY=" + strconv.Itoa(r.Try),
		"STEPSEQ_NOTIFY_WHO=" + r.Who,
		"STEPSEQ_NOTIFY_STATUS=" + r.Status,
		"STEPSEQ_NOTIFY_EVENT=" + r.Event,
		"STEPSEQ_NOTIFY_RUN=" + r.Run,
		"STEPSEQ_NOTIFY_OUTPUT=" + cut(r.Output, 4<<10),
		"STEPSEQ_NOTIFY_NEXT=" + r.Next,
	}
	if len(r.Summary) > 0 {
		b, _ := json.Marshal(r.Summary)
		vars = append(vars, "STEPSEQ_NOTIFY_SUMMARY="+cut(string(b), 4<<10))
	}
	// A NUL cannot be passed in the environment; exec would refuse the command.
	for i, v := range vars {
		vars[i] = strings.ReplaceAll(v, "\x00", "")
	}
	return vars
}

// idSource makes report IDs: 16 hex digits of a nanosecond clock that never goes
// back (so IDs sort in emit order even when the wall clock steps back), a dash, and
// 8 random hex digits that keep IDs of different workspaces apart.
type idSource struct {
	last int64 // nanoseconds of the last ID
}

func (s *idSource) next(now time.Time) string {
	n := now.UnixNano()
	if n <= s.last {
		n = s.last + 1
	}
	s.last = n
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%016x-%s", n, hex.EncodeToString(b[:]))
}

// observe makes the source continue after an ID read back from the outbox.
func (s *idSource) observe(id string) {
	if len(id) < 16 {
		return
	}
	if n, err := strconv.ParseInt(id[:16], 16, 64); err == nil && n > s.last {
		s.last = n
	}
}
