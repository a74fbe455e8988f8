package planspec

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestParseBudget(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "usd=5,tries=30", want: "usd=5,tries=30"},
		{in: "usd=$1.50, tokens=2000000, wall=4h", want: "usd=1.5,tokens=2000000,wall=4h"},
		{in: "usd=-1", err: "want a cost in USD ≥ 0"},
		{in: "dollars=5", err: `unknown budget key "dollars"`},
		{in: "tries", err: "want KEY=VALUE"},
		{in: "wall=4", err: "want a number with a unit"},
		{in: "", err: "empty budget"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			b, err := ParseBudget(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || b.String() != tc.want {
				t.Fatalf("ParseBudget = %v, %v; want %s", b, err, tc.want)
			}
		})
	}
}

func TestBudget_Apply(t *testing.T) {
	b := Budget{USD: 1, Tries: 30}
	cs, err := ParseBudgetChanges([]string{"usd=+2", "tries=40,wall=+1h"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Apply(cs)
	if err != nil || got != (Budget{USD: 3, Tries: 40, Wall: Duration(time.Hour)}) {
		t.Fatalf("Apply = %+v, %v", got, err)
	}
	if ChangesText(cs) != "usd=+2, tries=40, wall=+1h" {
		t.Errorf("ChangesText = %q", ChangesText(cs))
	}
	if _, err := ParseBudgetChanges([]string{"usd=+two"}); err == nil {
		t.Error("a change that does not read was taken")
	}
}

func TestSpend_Add(t *testing.T) {
	var s Spend
	cost := 0.25
	s.Add(&Usage{InputTokens: 100, OutputTokens: 20, CacheTokens: 1000, CostUSD: &cost})
	s.Add(&Usage{InputTokens: 10, OutputTokens: 2})
	s.Add(nil)
	s.Tries = 3
	if s.Tokens() != 1132 || s.CostUSD != 0.25 || s.Unknown != 1 || s.NoCost != 1 {
		t.Fatalf("spend = %+v", s)
	}
	if got := s.Text(); got != "$0.25, 1,132 tokens (110 in, 22 out, 1,000 cache), 3 tries, 1 with usage unknown" {
		t.Errorf("Text = %q", got)
	}
	if got := (Spend{Tries: 2, Unknown: 2}).Text(); got != "usage unknown, 2 tries" {
		t.Errorf("Text of unknown usage = %q", got)
	}
}

func TestParseUsage(t *testing.T) {
	u, err := ParseUsage(json.RawMessage(`{"inputTokens": 10, "outputTokens": 5, "costUsd": 0.01, "model": "m"}`))
	if err != nil || u.Tokens() != 15 || *u.CostUSD != 0.01 || u.Model != "m" {
		t.Fatalf("ParseUsage = %+v, %v", u, err)
	}
	for _, bad := range []string{`{"inputTokens": "ten"}`, `{"tokens": 5}`, `{"outputTokens": -1}`, `[1]`} {
		if _, err := ParseUsage(json.RawMessage(bad)); err == nil {
			t.Errorf("ParseUsage(%s) took it", bad)
		}
	}
}

// The budget, the spend and the try usage are extra keys: they survive a
// round trip, and the original's keys beside them are untouched.
func TestState_BudgetKeys(t *testing.T) {
	src := `{"plan": {"steps": {"a": {"title": "A", "instruction": "do a", "budget": {"usd": 2, "wall": "1h"}}}},
 "stepQueue": ["a"], "currentStep": 0, "status": "IN_PROGRESS",
 "stepRuns": {"a": {"status": "DONE", "tries": 1, "lastRunIso": "2026-01-01T00:00:00Z",
   "stepseq": {"startedIso": "2026-01-01T00:00:00Z", "spend": {"tries": 1, "inputTokens": 5, "costUsd": 0.5},
     "usage": [{"try": 1, "agent": "claude", "model": "m", "inputTokens": 5, "outputTokens": 0, "cacheTokens": 0, "costUsd": 0.5}]}}},
 "stepseq": {"budget": {"usd": 5, "tries": 30}, "spend": {"tries": 1, "costUsd": 0.5}, "budgetHeld": "budget: x"}}`
	st, err := ParseState(strings.NewReader(src), "state.json")
	if err != nil {
		t.Fatal(err)
	}
	if st.Settings.Budget != (Budget{USD: 5, Tries: 30}) || st.Steps["a"].Budget != (Budget{USD: 2, Wall: Duration(time.Hour)}) {
		t.Fatalf("budgets = %+v, %+v", st.Settings.Budget, st.Steps["a"].Budget)
	}
	run := st.StepRuns["a"]
	if run.Agent.Spend.CostUSD != 0.5 || len(run.Agent.Usage) != 1 || run.Agent.Usage[0].Agent != "claude" {
		t.Fatalf("run record = %+v", run.Agent)
	}
	again, err := ParseState(bytes.NewReader(st.Marshal()), "again")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Marshal(), st.Marshal()) || again.Settings.BudgetHeld != "budget: x" {
		t.Fatalf("not stable:\n%s", st.Marshal())
	}
	if _, err := ParseState(strings.NewReader(strings.Replace(src, `"usd": 5`, `"usd": "five"`, 1)), "bad"); err == nil ||
		!strings.Contains(err.Error(), "stepseq.budget") {
		t.Errorf("a bad budget: %v", err)
	}
}

func TestParseReport_Usage(t *testing.T) {
	for _, src := range []string{
		"status: done\nsummary: s\nevidence: e\nrisk: low\nnext: none\nusage: {inputTokens: 10, outputTokens: 5, costUsd: 0.02}\n",
		"status: done\nsummary: s\nevidence: e\nrisk: low\nnext: none\nusage:\n  inputTokens: 10\n  outputTokens: 5\n  costUsd: 0.02\n",
		`{"status": "done", "summary": "s", "evidence": "e", "risk": "low", "next": "none", "usage": {"inputTokens": 10, "outputTokens": 5, "costUsd": 0.02}}`,
	} {
		rep, err := ParseReport(strings.NewReader(src), "r")
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		u, err := rep.StatedUsage()
		if err != nil || u == nil || u.Tokens() != 15 || *u.CostUSD != 0.02 {
			t.Errorf("%q: usage = %+v, %v", src, u, err)
		}
	}
	rep, err := ParseReport(strings.NewReader("status: done\nsummary: s\nevidence: e\nrisk: low\nnext: none\nusage: lots\n"), "r")
	if err != nil {
		t.Fatalf("a malformed usage refused the report: %v", err)
	}
	if u, err := rep.StatedUsage(); u != nil || err == nil {
		t.Errorf("malformed usage read as %+v, %v", u, err)
	}
}

// A state encoded once, then its spend, a try's usage and a step's budget
// changed: the next encoding says so, whatever it remembered.
func TestState_SpendReencoded(t *testing.T) {
	src := `{"plan": {"steps": {"a": {"title": "A", "instruction": "do a"}}}, "stepQueue": ["a"], "currentStep": 0,
 "stepRuns": {"a": {"status": "IN_PROGRESS", "tries": 1, "stepseq": {"startedIso": "2026-01-01T00:00:00Z", "spend": {"tries": 1}}}},
 "status": "IN_PROGRESS"}`
	for _, tracked := range []bool{false, true} {
		st, err := ParseState(strings.NewReader(src), "state.json")
		if err != nil {
			t.Fatal(err)
		}
		if tracked {
			st.Track()
		}
		_ = st.Marshal()
		run := st.Run("a")
		c := 0.5
		run.Agent.Spend.Add(&Usage{InputTokens: 7, CostUSD: &c})
		run.Agent.Usage = append(run.Agent.Usage, TryUsage{Try: 1, Usage: Usage{InputTokens: 7, CostUSD: &c}})
		spec := *st.Steps["a"]
		spec.Budget = Budget{USD: 2}
		st.ReplaceSpec("a", &spec)
		again, err := ParseState(bytes.NewReader(st.Marshal()), "again")
		if err != nil {
			t.Fatal(err)
		}
		a := again.StepRuns["a"].Agent
		if a.Spend.CostUSD != 0.5 || len(a.Usage) != 1 || again.Steps["a"].Budget.USD != 2 {
			t.Errorf("tracked %v: re-encoded as %+v, budget %+v", tracked, a, again.Steps["a"].Budget)
		}
	}
}

func TestPriced(t *testing.T) {
	prices := map[string]Price{"codex": {Input: 1.25, Output: 10, Cache: 0.125}, "gemini-3-pro": {Input: 2, Output: 12}}
	codex := &Usage{InputTokens: 500, OutputTokens: 120, CacheTokens: 2000}
	if got := Priced(prices, codex, "codex"); got.CostUSD == nil || *got.CostUSD != 0.002075 || codex.CostUSD != nil {
		t.Errorf("codex priced %+v (was %+v)", got, codex)
	}
	gemini := &Usage{Model: "gemini-3-pro", InputTokens: 5000, OutputTokens: 300, CacheTokens: 3000}
	if got := Priced(prices, gemini, "gemini"); got.CostUSD == nil || *got.CostUSD != 0.0196 {
		t.Errorf("gemini priced by its model: %+v", got)
	}
	c := 0.5
	named := &Usage{InputTokens: 5, CostUSD: &c}
	if got := Priced(prices, named, "codex"); got != named {
		t.Errorf("a named cost was priced again: %+v", got)
	}
	if got := Priced(prices, nil, "codex"); got != nil {
		t.Errorf("an unknown usage was priced: %+v", got)
	}
	if _, err := ParsePrices([]byte(`{"codex": {"input": -1, "output": 2}}`)); err == nil {
		t.Error("a negative price was taken")
	}
	if _, err := ParsePrices([]byte(`{"codex": {"in": 1}}`)); err == nil {
		t.Error("an unknown key was taken")
	}
}

func TestBudgetFigure(t *testing.T) {
	for _, tc := range []struct {
		kind         string
		spent, bound float64
		want         string
	}{
		{BudgetUSD, 1.2, 1, "$1.20 of $1.00"},
		{BudgetUSD, 0.0042, 0.003, "$0.0042 of $0.0030"},
		{BudgetTokens, 2000100, 2000000, "2,000,100 of 2,000,000 tokens"},
		{BudgetTries, 30, 30, "30 of 30 tries"},
		{BudgetWall, float64(70 * time.Minute), float64(time.Hour), "1h10m of 1h"},
		{BudgetWall, float64(4*time.Hour + 2*time.Minute), float64(4 * time.Hour), "4h2m of 4h"},
		{BudgetWall, float64(90 * time.Second), float64(30 * time.Minute), "2m of 30m"},
	} {
		if got := BudgetFigure(tc.kind, tc.spent, tc.bound); got != tc.want {
			t.Errorf("BudgetFigure(%s, %v, %v) = %q, want %q", tc.kind, tc.spent, tc.bound, got, tc.want)
		}
	}
}
