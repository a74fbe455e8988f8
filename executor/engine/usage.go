package engine

import (
	"fmt"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// exitDetail is the journal's record of an agent's exit: how it ended, and
// what it spent, or that its usage is unknown (or did not read).
func exitDetail(exit core.Exit, u *planspec.Usage, err error) map[string]any {
	d := map[string]any{"code": exit.Code, "timedOut": exit.TimedOut, "ms": exit.Ended.Sub(exit.Started).Milliseconds()}
	switch {
	case err != nil:
		d["usage"] = "unknown: " + err.Error()
	case u == nil:
		d["usage"] = "unknown"
	}
	return d
}

// journaled counts what a journal entry says: a try's verdict, its usage.
func (m *Metrics) journaled(e core.Entry) {
	switch e.Event {
	case "verdict":
		ok, _ := e.Detail["ok"].(bool)
		seconds, timed := e.Detail["seconds"].(float64)
		m.verdict(ok, seconds, timed)
	case "usage":
		m.usage(e.Detail)
	}
}

// usage counts a try's usage from its journal entry's detail.
func (m *Metrics) usage(detail map[string]any) {
	if m == nil {
		return
	}
	for kind, key := range map[string]string{"input": "inputTokens", "output": "outputTokens", "cache": "cacheTokens"} {
		if n, ok := detail[key].(int64); ok && n > 0 {
			m.tokens.WithLabelValues(kind).Add(float64(n))
		}
	}
	if c, ok := detail["costUsd"].(float64); ok && c > 0 {
		m.cost.Add(c)
	}
}

// SpendReport is what a run spent and may spend, as status shows it.
type SpendReport struct {
	planspec.Spend
	// Text is the spend in words: "$1.20, 45,000 tokens (…), 4 tries".
	Text   string           `json:"text"`
	WallMs int64            `json:"wallMs"`
	Budget *planspec.Budget `json:"budget,omitempty"`
	// Held is the bound that holds the run, in words, as it was told.
	Held string `json:"held,omitempty"`
	// Blind says which bound cannot see some agent's spend: tries whose usage
	// or cost is unknown are not in the figures it compares.
	Blind string `json:"blind,omitempty"`
}

// spendReport is st's spend and budget; nil before its first try with no
// budget.
func spendReport(st *planspec.State, now time.Time) *SpendReport {
	s, b := st.Settings.Spend, st.Settings.Budget
	if s.IsZero() && b.IsZero() {
		return nil
	}
	r := &SpendReport{Spend: s, Text: s.Text(), WallMs: s.Wall(now).Milliseconds(), Held: st.Settings.BudgetHeld}
	if !b.IsZero() {
		r.Budget = &b
		switch {
		case b.Tokens > 0 && s.Unknown > 0:
			r.Blind = fmt.Sprintf("the tokens bound cannot see %d tries whose usage is unknown", s.Unknown)
		case b.USD > 0 && s.Unknown+s.NoCost > 0:
			r.Blind = fmt.Sprintf("the usd bound cannot see %d tries whose cost is unknown", s.Unknown+s.NoCost)
		}
	}
	return r
}

// stepSpend puts step id's spend, its tries' usage and its budget in its line.
func stepSpend(s *StepReport, st *planspec.State, id string, run *planspec.StepRun) {
	if run.Agent != nil && !run.Agent.Spend.IsZero() {
		sp := run.Agent.Spend
		s.Spend, s.Usage = &sp, run.Agent.Usage
	}
	if spec := st.Steps[id]; spec != nil && !spec.Budget.IsZero() {
		b := spec.Budget
		s.Budget = &b
	}
}

// workspaceSpend is what every live run of the workspace spent; nil when the
// workspace has one run or none spent.
func workspaceSpend(ws store.Workspace) *planspec.Spend {
	names, err := store.RunNames(store.Workspace{Dir: ws.Dir})
	if err != nil || len(names) < 2 {
		return nil
	}
	var total planspec.Spend
	for _, name := range names {
		rw := store.Workspace{Dir: ws.Dir}.ForRun(name)
		if st, err := (&store.StateFile{Path: rw.State}).Read(); err == nil {
			total = total.Plus(st.Settings.Spend)
		}
	}
	if total.IsZero() {
		return nil
	}
	return &total
}
