package cli

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// writeSpend writes what the run spent and may spend, and each step's spend:
// when the run has a budget or an agent said what it spent.
func writeSpend(b *bytes.Buffer, r engine.StatusReport) {
	s := r.Spend
	if s == nil || s.Budget == nil && s.Tokens() == 0 && s.CostUSD == 0 && s.Held == "" {
		return
	}
	fmt.Fprintf(b, "spend: %s", s.Text)
	if s.Budget != nil {
		fmt.Fprintf(b, "; budget %s", s.Budget)
	}
	b.WriteString("\n")
	if s.Held != "" {
		fmt.Fprintf(b, "held: %s: stepseq budget raises it\n", s.Held)
	}
	if s.Blind != "" {
		fmt.Fprintf(b, "note: %s\n", s.Blind)
	}
	for _, st := range r.Steps {
		if st.Spend == nil && st.Budget == nil {
			continue
		}
		line := "nothing spent"
		if st.Spend != nil {
			line = st.Spend.Text()
		}
		if st.Budget != nil {
			line += "; budget " + st.Budget.String()
		}
		if n := len(st.Usage); n > 0 {
			line += "; last try: " + tryUsageText(st.Usage[n-1])
		}
		fmt.Fprintf(b, "  %s: %s\n", st.ID, line)
	}
	if r.Workspace != nil {
		fmt.Fprintf(b, "workspace (every run): %s\n", r.Workspace.Text())
	}
}

// tryUsageText is one try's usage: "claude-opus-5-5 $0.0089, 6,580 tokens",
// or "usage unknown".
func tryUsageText(u planspec.TryUsage) string {
	if u.Unknown {
		return "usage unknown"
	}
	var parts []string
	if u.Model != "" {
		parts = append(parts, u.Model)
	} else if u.Agent != "" {
		parts = append(parts, u.Agent)
	}
	if u.CostUSD != nil {
		parts = append(parts, planspec.USD(*u.CostUSD))
	} else {
		parts = append(parts, "cost unknown")
	}
	return strings.Join(parts, " ") + ", " + planspec.Thousands(u.Tokens()) + " tokens"
}

// spentText is a run's spend in the runs table.
func spentText(r store.RunInfo) string {
	if r.Spend == nil {
		return "-"
	}
	s := r.Spend
	switch {
	case s.CostUSD > 0:
		return planspec.USD(s.CostUSD)
	case s.Tokens() > 0:
		return planspec.Thousands(s.Tokens()) + " tokens"
	case s.Tries > 0:
		return "unknown"
	}
	return "-"
}

// writeWorkspaceSpend writes what every run listed spent, when more than one
// spent anything.
func writeWorkspaceSpend(b *bytes.Buffer, runs []store.RunInfo) {
	var total planspec.Spend
	n := 0
	for _, r := range runs {
		if r.Spend != nil {
			total = total.Plus(*r.Spend)
			n++
		}
	}
	if n > 1 {
		fmt.Fprintf(b, "workspace: %s\n", total.Text())
	}
}
