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

// Budget changes what the run may spend (`stepseq budget usd=+2`, MCP
// budget): the run's budget, or step's own when step is set; with no step, the
// budget of the bound that holds the run. It says what comes of it. A change
// that does not read, or lowers a bound below zero, is refused
// (core.ErrBudgetChange), as is a step the plan does not have
// (core.ErrNoStep). Like a retry, it works with or without a live sidecar: the
// change is queued for whichever stepseq holds the run, and, with c.RT, applied
// at once when none does, so that the next check launches what the budget held.
// A change given from the environment of an agent stepseq launched (c.Env) is
// refused (ErrAgentBudget): an agent may not raise what it may spend.
func (c Commands) Budget(ctx context.Context, step string, changes []string, from string) (string, error) {
	if err := AgentBudget(c.Env); err != nil {
		return "", refusal(err)
	}
	cs, err := planspec.ParseBudgetChanges(changes)
	if err != nil {
		return "", refusal(fmt.Errorf("%w: %w", core.ErrBudgetChange, err))
	}
	t := core.Trigger{Step: step, From: from, Budget: changesArg(cs), ID: c.ID}
	var msg string
	switch {
	case c.SC != nil:
		msg, err = c.SC.budget(ctx, t, cs)
	case c.RT != nil:
		msg, err = budgetNow(c.RT, t, cs)
	default:
		msg, err = "budget "+planspec.ChangesText(cs)+" queued", enqueueBudget(c.WS, t, cs)
	}
	return msg, refusal(err)
}

// ErrAgentBudget is matched by a budget change given from the environment of
// an agent stepseq launched: what a run may spend is a person's to raise.
var ErrAgentBudget = errors.New("an agent stepseq launched may not change a run's budget")

// AgentBudget refuses env (nil: none to judge) when it is the environment of
// an agent stepseq launched, whose marks it holds (STEPSEQ_STEP and
// STEPSEQ_TRY): an agent may not raise what it may spend by running stepseq.
func AgentBudget(env func(string) string) error {
	return refuseAgent(env, ErrAgentBudget, "a person changes it, from their own shell (stepseq budget) or an operator's MCP session")
}

// budgetNow queues t, a budget change, for whichever stepseq holds the run,
// after the checks it needs; when none does, it applies it now.
func budgetNow(rt *Runtime, t core.Trigger, cs []planspec.BudgetChange) (string, error) {
	sf := &store.StateFile{Path: rt.WS.State}
	st, err := readCommanded(rt.WS, "no budget to change")
	if err != nil {
		return "", err
	}
	if err := core.CheckBudget(st, t.Step, cs); err != nil {
		return "", fmt.Errorf("%s: %w", rt.WS.State, err)
	}
	maxRetries, err := proc.MaxRetriesFromEnv(rt.Getenv)
	if err != nil {
		return "", err
	}
	what := planspec.ChangesText(cs)
	holder, err := triggerNow(rt, sf, t, maxRetries)
	if err != nil {
		return "", err
	}
	if holder != nil {
		return fmt.Sprintf("budget %s queued for the running %s (pid %d): the run goes on when no bound holds it", what, holder.Kind, holder.PID), nil
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

// budget hands the loop t, a budget change, after the checks Commands.Budget
// makes; it says the budget it leaves.
func (s *Sidecar) budget(ctx context.Context, t core.Trigger, cs []planspec.BudgetChange) (string, error) {
	var b planspec.Budget
	var err error
	if cerr := s.do(ctx, func() {
		d := s.main.d
		st := d.m.State()
		if err = core.CheckBudget(st, t.Step, cs); err != nil {
			return
		}
		d.feed(core.TriggersIn{Triggers: []core.Trigger{t}})
		if st = d.m.State(); st != nil {
			b = st.Settings.Budget
			if t.Step != "" && st.Steps[t.Step] != nil {
				b = st.Steps[t.Step].Budget
			}
		}
	}); cerr != nil {
		return "", cerr
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("budget %s: now %s", planspec.ChangesText(cs), b), nil
}

// enqueueBudget queues t, a budget change, for whichever stepseq holds
// workspace ws, after the checks it needs; it applies nothing itself.
func enqueueBudget(ws store.Workspace, t core.Trigger, cs []planspec.BudgetChange) error {
	st, err := readCommanded(ws, "no budget to change")
	if err != nil {
		return err
	}
	if err := core.CheckBudget(st, t.Step, cs); err != nil {
		return err
	}
	return WriteTrigger(ws, t)
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
