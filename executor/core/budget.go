package core

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stepseq/stepseq/planspec"
)

// Budgets: before a try starts, a run (or the step) that has reached a bound of
// its budget launches nothing and holds, told once with the figure, until the
// budget is raised. The spend is in the state (planspec.Spend), so every driver
// of the run, after any restart, counts on from it; a usage-limit wait spends
// nothing: it is no try, and its time is not wall time.

// EventBudget is the notification event of a run held by its budget.
const EventBudget = "budget"

// ErrBudgetChange is matched by a budget change that cannot be made: a bound
// that does not read, or one lowered below zero.
var ErrBudgetChange = errors.New("bad budget change")

// Bound is a budget's bound that is reached: of the run, or of step Step.
type Bound struct {
	Step         string
	Kind         string // planspec.BudgetUSD, …
	Spent, Limit float64
}

// Text is the bound as the user reads it: "budget: $1.20 of $1.00 spent
// (usd)", "budget: step review: 30 of 30 tries spent (tries)".
func (b Bound) Text() string {
	of := ""
	if b.Step != "" {
		of = "step " + b.Step + ": "
	}
	return fmt.Sprintf("budget: %s%s spent (%s)", of, planspec.BudgetFigure(b.Kind, b.Spent, b.Limit), b.Kind)
}

// BudgetReached is the first bound reached by step id's next try at now: the
// step's own budget first, then the run's.
func BudgetReached(st *planspec.State, id string, now time.Time) (Bound, bool) {
	run := st.StepRuns[id]
	if spec := st.Steps[id]; spec != nil && !spec.Budget.IsZero() && run != nil && run.Agent != nil {
		if b, ok := reached(spec.Budget, run.Agent.Spend, now, pendingWait(run, now)); ok {
			b.Step = id
			return b, true
		}
	}
	if st.Settings.Budget.IsZero() {
		return Bound{}, false
	}
	var wait time.Duration
	if run != nil {
		wait = pendingWait(run, now)
	}
	return reached(st.Settings.Budget, st.Settings.Spend, now, wait)
}

// reached is the first of b's bounds that s has reached; wait is a usage-limit
// wait that ends now, not counted as wall time.
func reached(b planspec.Budget, s planspec.Spend, now time.Time, wait time.Duration) (Bound, bool) {
	switch {
	case b.USD > 0 && s.CostUSD >= b.USD:
		return Bound{Kind: planspec.BudgetUSD, Spent: s.CostUSD, Limit: b.USD}, true
	case b.Tokens > 0 && s.Tokens() >= b.Tokens:
		return Bound{Kind: planspec.BudgetTokens, Spent: float64(s.Tokens()), Limit: float64(b.Tokens)}, true
	case b.Tries > 0 && s.Tries >= b.Tries:
		return Bound{Kind: planspec.BudgetTries, Spent: float64(s.Tries), Limit: float64(b.Tries)}, true
	}
	if wall := s.Wall(now) - wait; b.Wall > 0 && wall >= time.Duration(b.Wall) {
		return Bound{Kind: planspec.BudgetWall, Spent: float64(wall), Limit: float64(b.Wall)}, true
	}
	return Bound{}, false
}

// pendingWait is the usage-limit wait step run is in at now: from when its
// limited try ended.
func pendingWait(run *planspec.StepRun, now time.Time) time.Duration {
	if run.Phase != planspec.PhaseWaiting || run.Agent == nil || run.Agent.Limit.SinceIso == "" {
		return 0
	}
	ended, err := planspec.ParseISO(run.Agent.FinishedIso)
	if err != nil || now.Before(ended) {
		return 0
	}
	return now.Sub(ended)
}

// CheckBudget makes every check a budget change needs against st, without
// changing it: a step the plan has (none: the run's budget), and changes that
// read and leave no bound below zero. Every face asks it before it queues one.
func CheckBudget(st *planspec.State, step string, cs []planspec.BudgetChange) error {
	if step != "" && (st == nil || st.Steps[step] == nil) {
		return NoStep(st, step)
	}
	if len(cs) == 0 {
		return fmt.Errorf("%w: no change given: want KEY=+AMOUNT, like usd=+2", ErrBudgetChange)
	}
	var b planspec.Budget
	if st != nil {
		b = budgetOf(st, step)
	}
	if _, err := b.Apply(cs); err != nil {
		return fmt.Errorf("%w: %w", ErrBudgetChange, err)
	}
	return nil
}

func budgetOf(st *planspec.State, step string) planspec.Budget {
	if step != "" {
		return st.Steps[step].Budget
	}
	return st.Settings.Budget
}

// BudgetTarget is the step whose budget a change with no step names: the step
// that holds the run by its own budget, else "" (the run's).
func BudgetTarget(st *planspec.State, now time.Time) string {
	if st == nil || st.CurrentStep >= len(st.StepQueue) {
		return ""
	}
	if b, ok := BudgetReached(st, st.StepQueue[st.CurrentStep], now); ok {
		return b.Step
	}
	return ""
}

// ApplyBudget makes the changes to the run's budget, or step's, and lets the
// run go on: the held figure is forgotten, and told again if a bound still holds.
func ApplyBudget(st *planspec.State, step string, cs []planspec.BudgetChange) (planspec.Budget, error) {
	if err := CheckBudget(st, step, cs); err != nil {
		return planspec.Budget{}, err
	}
	b, _ := budgetOf(st, step).Apply(cs)
	if step == "" {
		st.Settings.Budget = b
	} else {
		// A spec is replaced, never edited in place: the encoded plan is
		// remembered by its specs.
		spec := *st.Steps[step]
		spec.Budget = b
		st.ReplaceSpec(step, &spec)
	}
	st.Settings.BudgetHeld = ""
	return b, nil
}

// BlindBudget says, for a try of step id whose usage came back unknown (or
// without a cost), which of the budgets over it cannot see that agent's spend;
// "" when none can be blind to it.
func BlindBudget(st *planspec.State, id, agent string, u *planspec.Usage) string {
	var kinds []string
	budgets := []planspec.Budget{st.Settings.Budget}
	if spec := st.Steps[id]; spec != nil {
		budgets = append(budgets, spec.Budget)
	}
	for _, b := range budgets {
		if b.USD > 0 && (u == nil || u.CostUSD == nil) && !slices.Contains(kinds, planspec.BudgetUSD) {
			kinds = append(kinds, planspec.BudgetUSD)
		}
		if b.Tokens > 0 && u == nil && !slices.Contains(kinds, planspec.BudgetTokens) {
			kinds = append(kinds, planspec.BudgetTokens)
		}
	}
	if len(kinds) == 0 {
		return ""
	}
	what := "usage"
	if u != nil {
		what = "cost"
	}
	if agent == "" {
		agent = "the agent"
	}
	return fmt.Sprintf("budget cannot see %s's spend (%s unknown): its %s bound counts only what agents report", agent, what, joinWords(kinds))
}

func joinWords(ws []string) string {
	if len(ws) == 2 {
		return ws[0] + " and " + ws[1]
	}
	return ws[0]
}
