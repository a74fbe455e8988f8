package planspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// What agents spend and what a run may spend. A try's usage is what its CLI's
// output or its worker's report said; the sums of a step and of a run live in
// the state (extra keys the original ignores and keeps), so that every process
// that drives the run, on this machine or another, counts on from the same
// figures.

// Usage is what one try of an agent spent. InputTokens are the input tokens
// not read from a cache, CacheTokens those read from or written to one; the
// three add up to every token the try cost. CostUSD is nil when the agent named
// no cost: unknown, never zero.
type Usage struct {
	Model        string   `json:"model,omitempty"`
	InputTokens  int64    `json:"inputTokens"`
	OutputTokens int64    `json:"outputTokens"`
	CacheTokens  int64    `json:"cacheTokens"`
	CostUSD      *float64 `json:"costUsd,omitempty"`
}

// Tokens is every token the usage counts.
func (u Usage) Tokens() int64 { return u.InputTokens + u.OutputTokens + u.CacheTokens }

// Plus adds o to u: the tokens, the cost when both name one (else unknown),
// the model when u has none.
func (u Usage) Plus(o Usage) Usage {
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.CacheTokens += o.CacheTokens
	switch {
	case u.CostUSD == nil || o.CostUSD == nil:
		u.CostUSD = nil
	default:
		c := *u.CostUSD + *o.CostUSD
		u.CostUSD = &c
	}
	if u.Model == "" {
		u.Model = o.Model
	}
	return u
}

// Check says what is wrong with a usage: a negative or non-finite figure.
func (u Usage) Check() error {
	if u.InputTokens < 0 || u.OutputTokens < 0 || u.CacheTokens < 0 {
		return errors.New("token counts must not be negative")
	}
	if c := u.CostUSD; c != nil && (*c < 0 || math.IsNaN(*c) || math.IsInf(*c, 0)) {
		return fmt.Errorf("costUsd %v: want a cost in USD ≥ 0", *c)
	}
	return nil
}

// ParseUsage reads a usage as a report states it: {inputTokens, outputTokens,
// cacheTokens, costUsd, model}, every member optional. A usage that does not
// read is the caller's to ignore: it never fails a report.
func ParseUsage(raw json.RawMessage) (*Usage, error) {
	var u Usage
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&u); err != nil {
		return nil, fmt.Errorf("usage: want {inputTokens, outputTokens, cacheTokens, costUsd, model}: %w", err)
	}
	if err := u.Check(); err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	return &u, nil
}

// TryUsage is one try's usage in its step's run record. Unknown: the agent
// said nothing of what it spent.
type TryUsage struct {
	Try     int    `json:"try"`
	Agent   string `json:"agent,omitempty"`
	Unknown bool   `json:"unknown,omitempty"`
	Usage
}

// MaxUsageKept bounds AgentRecord.Usage: the newest tries are kept, the sums
// count them all.
const MaxUsageKept = 10

// Spend is what a step or a run spent so far. Tries counts the tries stepseq
// launched; Unknown those whose agent said no usage, NoCost those that named
// tokens but no cost: their spend is not in the figures. SinceIso is when the
// first try started; WaitedSeconds the time spent waiting for usage limits,
// which a wall budget does not count.
type Spend struct {
	Tries         int     `json:"tries,omitempty"`
	InputTokens   int64   `json:"inputTokens,omitempty"`
	OutputTokens  int64   `json:"outputTokens,omitempty"`
	CacheTokens   int64   `json:"cacheTokens,omitempty"`
	CostUSD       float64 `json:"costUsd,omitempty"`
	Unknown       int     `json:"unknown,omitempty"`
	NoCost        int     `json:"noCost,omitempty"`
	SinceIso      string  `json:"sinceIso,omitempty"`
	WaitedSeconds float64 `json:"waitedSeconds,omitempty"`
}

// IsZero reports whether nothing was spent or started.
func (s Spend) IsZero() bool { return s == Spend{} }

// Tokens is every token spent.
func (s Spend) Tokens() int64 { return s.InputTokens + s.OutputTokens + s.CacheTokens }

// Add counts a try's usage; nil is a try whose usage is unknown.
func (s *Spend) Add(u *Usage) {
	if u == nil {
		s.Unknown++
		return
	}
	s.InputTokens += u.InputTokens
	s.OutputTokens += u.OutputTokens
	s.CacheTokens += u.CacheTokens
	if u.CostUSD != nil {
		// Kept to a millionth of a dollar: a sum of thousands of tries stays
		// exact enough to print and to compare with a bound.
		s.CostUSD = Round6(s.CostUSD + *u.CostUSD)
	} else {
		s.NoCost++
	}
}

// Plus is the sum of two spends: a workspace's of its runs, a run's of its
// steps. The earlier start stands.
func (s Spend) Plus(o Spend) Spend {
	s.Tries += o.Tries
	s.InputTokens += o.InputTokens
	s.OutputTokens += o.OutputTokens
	s.CacheTokens += o.CacheTokens
	s.CostUSD = Round6(s.CostUSD + o.CostUSD)
	s.Unknown += o.Unknown
	s.NoCost += o.NoCost
	s.WaitedSeconds += o.WaitedSeconds
	if s.SinceIso == "" || o.SinceIso != "" && o.SinceIso < s.SinceIso {
		s.SinceIso = o.SinceIso
	}
	return s
}

// Round6 rounds a cost to a millionth of a dollar, as a spend keeps it.
func Round6(v float64) float64 { return math.Round(v*1e6) / 1e6 }

// Wall is how long the spend has run at now: since its first try, less the
// usage-limit waits.
func (s Spend) Wall(now time.Time) time.Duration {
	since, err := ParseISO(s.SinceIso)
	if s.SinceIso == "" || err != nil || now.Before(since) {
		return 0
	}
	return max(0, now.Sub(since)-time.Duration(s.WaitedSeconds*float64(time.Second)))
}

// Text is the spend as one line: "$1.20, 45,000 tokens (30,000 in, 12,000
// out, 3,000 cache), 4 tries", with the tries whose usage is unknown named.
func (s Spend) Text() string {
	tries := countWord(s.Tries, "try", "tries")
	switch {
	case s.IsZero():
		return "nothing spent"
	case s.Tokens() == 0 && s.CostUSD == 0 && s.Unknown > 0:
		return "usage unknown, " + tries
	case s.Tokens() == 0 && s.CostUSD == 0:
		return "nothing reported yet, " + tries
	}
	cost := USD(s.CostUSD)
	if s.CostUSD == 0 && s.NoCost > 0 {
		cost = "cost unknown"
	}
	switch {
	case s.Unknown > 0:
		tries += fmt.Sprintf(", %d with usage unknown", s.Unknown)
	case s.NoCost > 0 && s.CostUSD > 0:
		tries += fmt.Sprintf(", %d with cost unknown", s.NoCost)
	}
	return fmt.Sprintf("%s, %s tokens (%s in, %s out, %s cache), %s", cost, Thousands(s.Tokens()),
		Thousands(s.InputTokens), Thousands(s.OutputTokens), Thousands(s.CacheTokens), tries)
}

func countWord(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// USD writes a cost: "$1.20", "$0.0042" for less than a cent.
func USD(v float64) string {
	if v != 0 && math.Abs(v) < 0.01 {
		return "$" + strconv.FormatFloat(v, 'f', 4, 64)
	}
	return "$" + strconv.FormatFloat(v, 'f', 2, 64)
}

// Thousands writes n with thousands separators: 2,000,000.
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
