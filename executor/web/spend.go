package web

import (
	"strings"

	"github.com/stepseq/stepseq/executor/engine"
)

// spendText is the run's spend line: what it spent, its budget, the bound
// that holds it; empty before anything is known and without a budget.
func spendText(r engine.StatusReport) string {
	s := r.Spend
	if s == nil || s.Budget == nil && s.Tokens() == 0 && s.CostUSD == 0 && s.Held == "" {
		return ""
	}
	parts := []string{s.Text}
	if s.Budget != nil {
		parts = append(parts, "budget "+s.Budget.String())
	}
	if s.Held != "" {
		parts = append(parts, "held: "+s.Held)
	}
	if s.Blind != "" {
		parts = append(parts, s.Blind)
	}
	if r.Workspace != nil {
		parts = append(parts, "every run: "+r.Workspace.Text())
	}
	return strings.Join(parts, "; ")
}

// stepSpendText is a step's spend; empty when its tries said nothing.
func stepSpendText(s engine.StepReport) string {
	if s.Spend == nil || s.Spend.Tokens() == 0 && s.Spend.CostUSD == 0 {
		return ""
	}
	return s.Spend.Text()
}
