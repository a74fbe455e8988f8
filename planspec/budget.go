package planspec

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Budget bounds what a run, or one step of it, may spend: a cost in USD,
// tokens, tries, and wall time since its first try (usage-limit waits not
// counted). A zero bound is no bound. A step's budget holds beside its plan's:
// whichever is reached first stops the next try.
type Budget struct {
	USD    float64  `json:"usd,omitempty"`
	Tokens int64    `json:"tokens,omitempty"`
	Tries  int      `json:"tries,omitempty"`
	Wall   Duration `json:"wall,omitempty"`
}

// Budget kinds, the keys of a budget and the words of its figures.
const (
	BudgetUSD    = "usd"
	BudgetTokens = "tokens"
	BudgetTries  = "tries"
	BudgetWall   = "wall"
)

// BudgetKeys are a budget's keys, in the order figures are told.
var BudgetKeys = []string{BudgetUSD, BudgetTokens, BudgetTries, BudgetWall}

// IsZero reports whether the budget bounds nothing.
func (b Budget) IsZero() bool { return b == Budget{} }

// UnmarshalJSON reads {usd, tokens, tries, wall} with wall as a span ("4h").
func (b *Budget) UnmarshalJSON(data []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return errors.New("want {usd, tokens, tries, wall}")
	}
	var out Budget
	for _, k := range slices.Sorted(mapKeys(m)) {
		var text string
		if json.Unmarshal(m[k], &text) != nil {
			text = string(m[k])
		}
		if err := out.set(k, text); err != nil {
			return err
		}
	}
	*b = out
	return nil
}

func mapKeys(m map[string]json.RawMessage) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// set sets one bound from its text: "5", "2000000", "30", "4h".
func (b *Budget) set(key, text string) error {
	text = strings.TrimSpace(text)
	switch key {
	case BudgetUSD:
		v, err := strconv.ParseFloat(strings.TrimPrefix(text, "$"), 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return fmt.Errorf("budget usd %q: want a cost in USD ≥ 0, like 5 or 2.50", text)
		}
		b.USD = v
	case BudgetTokens:
		v, err := strconv.ParseInt(strings.ReplaceAll(text, "_", ""), 10, 64)
		if err != nil || v < 0 {
			return fmt.Errorf("budget tokens %q: want a whole number ≥ 0, like 2000000", text)
		}
		b.Tokens = v
	case BudgetTries:
		v, err := strconv.Atoi(text)
		if err != nil || v < 0 || v > math.MaxInt32 {
			return fmt.Errorf("budget tries %q: want a whole number ≥ 0, like 30", text)
		}
		b.Tries = v
	case BudgetWall:
		d, err := ParseDuration(text)
		if err != nil {
			return fmt.Errorf("budget wall: %w", err)
		}
		b.Wall = d
	default:
		return fmt.Errorf("unknown budget key %q: want %s%s", key, strings.Join(BudgetKeys, ", "), didYouMean(key, BudgetKeys))
	}
	return nil
}

func didYouMean(word string, among []string) string {
	if s := Suggest(word, among); s != "" {
		return fmt.Sprintf(" (did you mean %s?)", s)
	}
	return ""
}

// ParseBudget reads a budget as the command line gives it: "usd=5,tries=30",
// keys usd, tokens, tries and wall.
func ParseBudget(s string) (Budget, error) {
	var b Budget
	if strings.TrimSpace(s) == "" {
		return b, errors.New("empty budget: want KEY=VALUE pairs, like usd=5,tries=30")
	}
	for pair := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok {
			return Budget{}, fmt.Errorf("budget %q: want KEY=VALUE, like usd=5", pair)
		}
		if err := b.set(strings.TrimSpace(k), v); err != nil {
			return Budget{}, err
		}
	}
	return b, nil
}

// String is the budget as ParseBudget reads it, its bounds in BudgetKeys'
// order; "none" when it bounds nothing.
func (b Budget) String() string {
	var parts []string
	if b.USD > 0 {
		parts = append(parts, "usd="+strconv.FormatFloat(b.USD, 'f', -1, 64))
	}
	if b.Tokens > 0 {
		parts = append(parts, "tokens="+strconv.FormatInt(b.Tokens, 10))
	}
	if b.Tries > 0 {
		parts = append(parts, "tries="+strconv.Itoa(b.Tries))
	}
	if b.Wall > 0 {
		parts = append(parts, "wall="+b.Wall.String())
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// BudgetChange is one bound's change as `stepseq budget` gives it: usd=+2
// raises the bound by 2 (Add), usd=7 sets it.
type BudgetChange struct {
	Key   string `json:"key"`
	Value string `json:"value"` // the bound's text, without the sign
	Add   bool   `json:"add,omitempty"`
}

// ParseBudgetChanges reads `usd=+2 tries=+10 wall=8h`, each word one bound
// or several joined by commas.
func ParseBudgetChanges(words []string) ([]BudgetChange, error) {
	var out []BudgetChange
	for _, w := range words {
		for pair := range strings.SplitSeq(w, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
			if !ok {
				return nil, fmt.Errorf("budget change %q: want KEY=+AMOUNT or KEY=VALUE, like usd=+2", pair)
			}
			c := BudgetChange{Key: strings.TrimSpace(k)}
			v = strings.TrimSpace(v)
			if rest, ok := strings.CutPrefix(v, "+"); ok {
				c.Add, v = true, rest
			}
			c.Value = v
			if err := new(Budget).set(c.Key, v); err != nil {
				return nil, err
			}
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no budget change: want KEY=+AMOUNT, like usd=+2, or KEY=VALUE")
	}
	return out, nil
}

// Apply is the budget with the changes made. A change that does not read is
// an error and changes nothing.
func (b Budget) Apply(cs []BudgetChange) (Budget, error) {
	out := b
	for _, c := range cs {
		var d Budget
		if err := d.set(c.Key, c.Value); err != nil {
			return b, err
		}
		switch c.Key {
		case BudgetUSD:
			out.USD = math.Round((d.USD+addend(c.Add, out.USD))*1e6) / 1e6
		case BudgetTokens:
			out.Tokens = d.Tokens + int64(addend(c.Add, float64(out.Tokens)))
		case BudgetTries:
			out.Tries = d.Tries + int(addend(c.Add, float64(out.Tries)))
		case BudgetWall:
			out.Wall = d.Wall + Duration(addend(c.Add, float64(out.Wall)))
		}
	}
	return out, nil
}

func addend(add bool, was float64) float64 {
	if add {
		return was
	}
	return 0
}

// ChangesText says the changes as given: "usd=+2, tries=40".
func ChangesText(cs []BudgetChange) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		sign := ""
		if c.Add {
			sign = "+"
		}
		parts[i] = c.Key + "=" + sign + c.Value
	}
	return strings.Join(parts, ", ")
}

// BudgetFigure is how far a bound is spent: "$1.20 of $1.00", "30 of 30
// tries".
func BudgetFigure(kind string, spent, bound float64) string {
	switch kind {
	case BudgetUSD:
		return USD(spent) + " of " + USD(bound)
	case BudgetTokens:
		return Thousands(int64(spent)) + " of " + Thousands(int64(bound)) + " tokens"
	case BudgetTries:
		return fmt.Sprintf("%d of %d tries", int(spent), int(bound))
	case BudgetWall:
		return spanText(time.Duration(spent)) + " of " + spanText(time.Duration(bound))
	}
	return fmt.Sprintf("%g of %g", spent, bound)
}

// spanText writes a wall time as a person reads it: "1h10m", "4h", "45s".
func spanText(d time.Duration) string {
	if d < time.Minute {
		return d.Round(time.Second).String()
	}
	s := d.Round(time.Minute).String() // "1h10m0s"
	s = strings.TrimSuffix(s, "0s")
	return strings.TrimSuffix(s, "h0m") + map[bool]string{true: "h", false: ""}[strings.HasSuffix(s, "h0m")]
}
