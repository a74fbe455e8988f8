package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
	planpkg "github.com/stepseq/stepseq/planspec/plan"
)

// Budget changes what the run may spend (`stepseq budget usd=+2`, MCP budget):
// the run's budget, or step's own when step is set; with no step, the budget
// of the bound that holds the run. Every check is made here once, whichever
// face asks: a change that does not read, or lowers a bound below zero, is
// refused (core.ErrBudgetChange), as is a step the plan does not have
// (core.ErrNoStep). Like a retry, it works with or without a live sidecar: the
// change is queued for whichever stepseq holds the run, and applied at once
// when none does, so that the next check launches what the budget held.
func Budget(rt *Runtime, step string, changes []string) (string, error) {
	cs, err := planspec.ParseBudgetChanges(changes)
	if err != nil {
		return "", fmt.Errorf("%w: %w", core.ErrBudgetChange, err)
	}
	sf := &store.StateFile{Path: rt.WS.State}
	st, err := sf.Read()
	if err != nil {
		return "", err
	}
	if err := core.CheckBudget(st, step, cs); err != nil {
		return "", fmt.Errorf("%s: %w", rt.WS.State, err)
	}
	t := core.Trigger{Step: step, From: "budget", Budget: changesArg(cs)}
	maxRetries, err := proc.MaxRetriesFromEnv(rt.Getenv)
	if err != nil {
		return "", err
	}
	if err := WriteTrigger(rt.WS, t); err != nil {
		return "", err
	}
	what := planspec.ChangesText(cs)
	lock, holder, err := store.TryLock(rt.WS, t.From)
	if errors.Is(err, store.ErrLocked) {
		return fmt.Sprintf("budget %s queued for the running %s (pid %d): the run goes on when no bound holds it", what, holder.Kind, holder.PID), nil
	}
	if err != nil {
		return "", err
	}
	defer lock.Unlock()
	ts, _ := DrainTriggers(rt.WS)
	if err := applyTriggers(rt, sf, ts, maxRetries, t.From); err != nil {
		return "", err
	}
	after, err := sf.Read()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("budget %s: now %s; %s", what, after.Settings.Budget, budgetWord(after, rt)), nil
}

// budgetWord says whether a bound still holds the run after a change.
func budgetWord(st *planspec.State, rt *Runtime) string {
	if st.CurrentStep < len(st.StepQueue) {
		if b, over := core.BudgetReached(st, st.StepQueue[st.CurrentStep], rt.now()); over {
			return b.Text() + ": still held"
		}
	}
	return "no sidecar is running, so the next `stepseq check` goes on"
}

// changesArg is the changes as a trigger carries them.
func changesArg(cs []planspec.BudgetChange) string {
	return strings.ReplaceAll(planspec.ChangesText(cs), ", ", ",")
}

// Budget changes the budget of the sidecar's run (MCP budget), after the
// checks Budget makes.
func (s *Sidecar) Budget(ctx context.Context, step string, changes []string) (planspec.Budget, error) {
	cs, err := planspec.ParseBudgetChanges(changes)
	if err != nil {
		return planspec.Budget{}, fmt.Errorf("%w: %w", core.ErrBudgetChange, err)
	}
	var b planspec.Budget
	if cerr := s.do(ctx, func() {
		st := s.d.m.State()
		if err = core.CheckBudget(st, step, cs); err != nil {
			return
		}
		s.d.feed(core.TriggersIn{Triggers: []core.Trigger{{Step: step, From: "mcp", Budget: changesArg(cs)}}})
		if st = s.d.m.State(); st != nil {
			b = st.Settings.Budget
			if step != "" && st.Steps[step] != nil {
				b = st.Steps[step].Budget
			}
		}
	}); cerr != nil {
		return planspec.Budget{}, cerr
	}
	return b, err
}

// EnqueueBudget queues a budget change for whichever stepseq holds workspace
// ws, after the checks Budget makes; it applies nothing itself.
func EnqueueBudget(ws store.Workspace, step string, changes []string) error {
	cs, err := planspec.ParseBudgetChanges(changes)
	if err != nil {
		return fmt.Errorf("%w: %w", core.ErrBudgetChange, err)
	}
	st, err := (&store.StateFile{Path: ws.State}).Read()
	if err != nil {
		return err
	}
	if err := core.CheckBudget(st, step, cs); err != nil {
		return err
	}
	return WriteTrigger(ws, core.Trigger{Step: step, From: "mcp", Budget: changesArg(cs)})
}

// BudgetBlind says which agents of plan p a usd or tokens bound of its
// budgets cannot see the spend of, each once: a CLI whose output names no
// cost (codex, gemini) or no usage at all (a command, aider, goose,
// openclaw, STEP_AGENT_CMD). Their tries count as unknown unless their
// worker reports what they spent.
func BudgetBlind(p *planpkg.Plan) []string {
	var out []string
	seen := map[string]bool{}
	note := func(b planspec.Budget, agents []string, of string) {
		for _, a := range agents {
			tokens, cost := proc.UsageReported(a)
			if _, priced := p.Prices[a]; priced && tokens {
				cost = true
			}
			var kinds []string
			if b.USD > 0 && !cost {
				kinds = append(kinds, planspec.BudgetUSD)
			}
			if b.Tokens > 0 && !tokens {
				kinds = append(kinds, planspec.BudgetTokens)
			}
			what := "usage"
			if tokens {
				what = "cost"
			}
			if len(kinds) == 0 || seen[a+of] {
				continue
			}
			seen[a+of] = true
			out = append(out, fmt.Sprintf("the %s budget%s cannot see what %s spends: its output names no %s; its worker may report it (stepseq report --cost, --tokens-in, --tokens-out)",
				strings.Join(kinds, " and "), of, agentWord(a), what))
		}
	}
	for _, s := range p.Steps {
		agents := stepAgents(p, s.Spec)
		note(p.Budget, agents, "")
		note(s.Spec.Budget, agents, " of step "+s.ID)
	}
	return out
}

// stepAgents are the presets (or "" for a command) a step's try may run.
func stepAgents(p *planpkg.Plan, spec planspec.StepSpec) []string {
	agent, fallback := spec.Agent, spec.Fallback
	if agent.IsZero() {
		agent = p.Agent
	}
	if fallback == nil {
		fallback = p.Fallback
	}
	return append([]string{agent.Preset}, fallback...)
}

func agentWord(preset string) string {
	if preset == "" {
		return "a command (STEP_AGENT_CMD or an argv)"
	}
	return preset
}

// warnBlind tells the operator, as a plan starts, which of its agents its
// budget cannot see the spend of.
func (r *Runtime) warnBlind(pf core.PlanFile) {
	if r.Logger == nil {
		return
	}
	p := *pf.Plan
	p.Budget = pf.RunBudget()
	for _, n := range BudgetBlind(&p) {
		r.Logger.Warn(n, "plan", pf.Source)
	}
}
