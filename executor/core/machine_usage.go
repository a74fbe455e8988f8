package core

import (
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/stepseq/stepseq/planspec"
)

// What a try spent goes into the state with the write that records its
// verdict; the try itself is counted with the write that records its launch.
// A kill between the two loses that one try's figure, never more.

// spendTry counts a try that starts: a new try (not an interrupted one run
// again, nor one a usage limit held), the start of the wall clock, and the
// usage-limit wait it comes out of.
func (m *Machine) spendTry(id string, newTry bool, waited time.Duration) {
	now := planspec.FormatISO(m.now)
	run := m.st.Run(id)
	for _, s := range []*planspec.Spend{&m.st.Settings.Spend, &run.Agent.Spend} {
		if s.SinceIso == "" {
			s.SinceIso = now
		}
		if newTry {
			s.Tries++
		}
		s.WaitedSeconds += waited.Seconds()
	}
	m.st.Settings.BudgetHeld = ""
}

// recordUsage keeps what the finished try spent: its output's figure, else
// the one its worker reported; unknown when neither says. A limited try, or
// one whose agent could not start, that said nothing spent nothing.
func (m *Machine) recordUsage(t *tryExit, limited bool) {
	run := m.st.Run(t.step)
	if run.Agent == nil {
		run.Agent = &planspec.AgentRecord{}
	}
	u, agent := t.usage, t.agent
	if t.usageErr != "" {
		m.journal(Entry{Event: "usage-ignored", Step: t.step, Try: t.try, Reason: t.usageErr})
		m.log(slog.LevelWarn, "the agent's usage does not read: ignored, the try's usage is unknown", "step", t.step, "try", t.try, "err", t.usageErr)
	}
	if u == nil {
		u = m.reportedUsage(run, t)
	}
	u = planspec.Priced(m.st.Settings.Prices, u, agent)
	if u == nil && (limited || t.exit.Err != nil) {
		return // an agent out of quota, or one that never started, spent nothing
	}
	run.Agent.Spend.Add(u)
	m.st.Settings.Spend.Add(u)
	rec := planspec.TryUsage{Try: t.try, Agent: agent, Unknown: u == nil}
	var detail map[string]any
	if u != nil {
		rec.Usage = *u
		detail = map[string]any{"model": u.Model, "inputTokens": u.InputTokens, "outputTokens": u.OutputTokens, "cacheTokens": u.CacheTokens}
		if u.CostUSD != nil {
			detail["costUsd"] = *u.CostUSD
		}
	}
	if agent != "" && detail != nil {
		detail["agent"] = agent
	}
	// A new list, never the old one changed in place: a copy of the record
	// may share it.
	kept := append(slices.Clip(run.Agent.Usage), rec)
	run.Agent.Usage = kept[max(0, len(kept)-planspec.MaxUsageKept):]
	if u != nil {
		// An unknown usage is in the exit's journal entry, which the driver
		// writes knowing whether the agent could have said it.
		m.journal(Entry{Event: "usage", Step: t.step, Try: t.try, Detail: detail})
	}
	if why := BlindBudget(m.st, t.step, agent, u); why != "" {
		m.journal(Entry{Event: "budget-blind", Step: t.step, Try: t.try, Reason: why})
		m.log(slog.LevelWarn, why, "step", t.step, "try", t.try)
	}
}

// reportedUsage is the usage the try's worker stated in its last report that
// states one; a usage that does not read is journaled and ignored.
func (m *Machine) reportedUsage(run *planspec.StepRun, t *tryExit) *planspec.Usage {
	for i := len(run.Reports) - 1; i >= 0; i-- {
		r := run.Reports[i]
		if r.Try != t.try || len(r.Usage) == 0 {
			continue
		}
		u, err := r.StatedUsage()
		if err != nil {
			m.journal(Entry{Event: "usage-ignored", Step: t.step, Try: t.try, Reason: "report: " + err.Error()})
			continue
		}
		if u != nil {
			return u
		}
	}
	return nil
}

// overBudget holds the run at a bound of its budget: the user is told once,
// and the state remembers it, so that a restart tells it no more.
func (m *Machine) overBudget(d Decision) {
	if sameHold(m.st.Settings.BudgetHeld, d.Reason) {
		return
	}
	m.st.Settings.BudgetHeld = d.Reason
	m.markDirty("budget")
	m.journal(Entry{Event: "budget", Step: d.Step, Reason: d.Reason})
	m.notifyEvent(d.Step, 0, planspec.PhaseBlocked, EventBudget, d.Reason+"; nothing launches until the budget is raised",
		"stepseq budget "+raiseHint(d.Reason))
}

// sameHold reports whether two hold texts are of the same bound: the figure of
// a wall bound grows while it holds.
func sameHold(a, b string) bool {
	cut := func(s string) string {
		if i := strings.LastIndex(s, " ("); i >= 0 {
			if j := strings.Index(s, ": "); j >= 0 && strings.HasPrefix(s[j+2:], "step ") {
				k := strings.Index(s[j+2:], ": ")
				return s[:j+2+k] + s[i:]
			}
			return s[i:]
		}
		return s
	}
	return a != "" && cut(a) == cut(b)
}

// raiseHint is the change that raises the bound a hold text names.
func raiseHint(held string) string {
	kind := strings.TrimSuffix(held[strings.LastIndex(held, "(")+1:], ")")
	amount := map[string]string{planspec.BudgetUSD: "+2", planspec.BudgetTokens: "+1000000", planspec.BudgetTries: "+10", planspec.BudgetWall: "+1h"}[kind]
	if amount == "" {
		return "usd=+2"
	}
	return kind + "=" + amount
}

// raiseBudget applies `stepseq budget`: the run goes on when no bound holds.
func (m *Machine) raiseBudget(t Trigger) {
	step := t.Step
	if step == "" {
		step = BudgetTarget(m.st, m.now)
	}
	cs, err := planspec.ParseBudgetChanges([]string{t.Budget})
	var b planspec.Budget
	if err == nil {
		b, err = ApplyBudget(m.st, step, cs)
	}
	of := "the run"
	if step != "" {
		of = "step " + step
	}
	if err != nil {
		m.log(slog.LevelWarn, "budget change refused", "step", step, "err", err)
		m.journal(Entry{Event: "budget-refused", Step: step, Reason: err.Error()})
		return
	}
	m.toldBlocked = ""
	m.planDone = false
	m.journal(Entry{Event: "budget-raised", Step: step, Reason: planspec.ChangesText(cs) + " from " + t.From,
		Detail: map[string]any{"budget": b.String()}})
	m.log(slog.LevelInfo, "budget changed", "of", of, "budget", b.String())
	m.markDirty("budget")
}

// spendOf is the run's spend for a notification; nil when nothing was spent.
func spendOf(st *planspec.State) *planspec.Spend {
	if st == nil || st.Settings.Spend.IsZero() {
		return nil
	}
	s := st.Settings.Spend
	return &s
}

// keptSpend is what a step's record keeps when the step runs anew (a re-run,
// a loop's next round): its spend, which its budget counts across them.
func keptSpend(a *planspec.AgentRecord) *planspec.AgentRecord {
	if a == nil || a.Spend.IsZero() && len(a.Usage) == 0 {
		return nil
	}
	return &planspec.AgentRecord{Spend: a.Spend, Usage: a.Usage}
}

// withCost puts what the run spent in the summary of its last report, as
// "cost", when an agent said what it spent: the run's summary names it.
func withCost(n *Notification, s planspec.Spend) {
	if s.Tokens() == 0 && s.CostUSD == 0 {
		return
	}
	if n.Summary == nil {
		n.Summary = map[string]any{}
	}
	n.Summary["cost"] = s.Text()
}

// keepSpend carries the run's spend through an edit of its plan: the spend
// and the held figure stand, and so does each bound of the run's budget that
// is above the edited plan's (a raise, a --budget), or that the edit leaves
// out.
func keepSpend(s *planspec.Settings, was planspec.Settings) {
	s.Spend, s.BudgetHeld = was.Spend, was.BudgetHeld
	b, old := &s.Budget, was.Budget
	if old.USD > b.USD || b.USD == 0 {
		b.USD = old.USD
	}
	if old.Tokens > b.Tokens || b.Tokens == 0 {
		b.Tokens = old.Tokens
	}
	if old.Tries > b.Tries || b.Tries == 0 {
		b.Tries = old.Tries
	}
	if old.Wall > b.Wall || b.Wall == 0 {
		b.Wall = old.Wall
	}
}
