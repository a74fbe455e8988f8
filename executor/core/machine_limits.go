package core

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/stepseq/stepseq/planspec"
)

// Usage limits and sessions. A try whose every agent said it is out
// of quota is no failed try: the run goes back to PENDING with the try count it
// had before (the same try runs again, no try spent), in phase waiting, with the
// limit in its record (an extra key the original ignores), so that a restart
// waits for the same time. Reconcile holds the step until then (LimitWaiting);
// the machine's one timer wakes it: an idle wait costs nothing.

// EventWaitingLimit is the notification event of a usage-limit wait, at its start
// and at its end.
const EventWaitingLimit = "waiting_limit"

// LimitWait is how long step id waits at most for a usage limit to reset: the
// step's limitWait, else the plan's, else 12h.
func LimitWait(st *planspec.State, id string) time.Duration {
	if sp := st.Steps[id]; sp != nil && sp.LimitWait > 0 {
		return time.Duration(sp.LimitWait)
	}
	if st.Settings.LimitWait > 0 {
		return time.Duration(st.Settings.LimitWait)
	}
	return time.Duration(planspec.DefaultLimitWait)
}

// ResumeOn reports whether a retry of step id continues the agent's session: the
// step's resume, else the plan's.
func ResumeOn(st *planspec.State, id string) bool {
	if sp := st.Steps[id]; sp != nil && sp.Resume != nil {
		return *sp.Resume
	}
	return st.Settings.Resume
}

// limitUntil is when a step held by a usage limit runs again.
func limitUntil(run *planspec.StepRun) (time.Time, bool) {
	if run.Phase != planspec.PhaseWaiting || run.Agent == nil || run.Agent.Limit.UntilIso == "" {
		return time.Time{}, false
	}
	t, err := planspec.ParseISO(run.Agent.Limit.UntilIso)
	return t, err == nil
}

// holdForLimit takes a try whose agents were all limited: it holds the step until
// the earliest reset they named (a backoff when none did), or, once the wait
// would pass limitWait, lets the try fail with the limit as its error.
func (m *Machine) holdForLimit(t *tryExit) bool {
	if len(t.limits) == 0 || t.stop != "" {
		return false
	}
	run := m.st.Run(t.step)
	hold := run.Agent.Limit
	since, err := planspec.ParseISO(hold.SinceIso)
	if err != nil {
		since = m.now
	}
	hold.Waits++
	until, stated := time.Time{}, false
	for _, l := range t.limits {
		at, named := l.Reset, !l.Reset.IsZero()
		if !named {
			at = m.now.Add(limitBackoff(hold.Waits))
		}
		if until.IsZero() || at.Before(until) {
			until, stated = at, named
		}
	}
	wait := LimitWait(m.st, t.step)
	deadline := since.Add(wait)
	text := FirstChars(t.limits[len(t.limits)-1].Text, ErrorChars)
	switch {
	case !m.now.Before(deadline):
		t.agentFailed = fmt.Sprintf("%s (usage limit: still limited after limitWait %s)", text, wait)
		return false
	case stated && until.After(deadline):
		t.agentFailed = fmt.Sprintf("%s (usage limit: resets at %s, past limitWait %s)", text, planspec.FormatISO(until), wait)
		return false
	case until.After(deadline):
		until = deadline // the last backoff ends with the wait
	}
	first := hold.SinceIso == ""
	hold = planspec.LimitHold{SinceIso: planspec.FormatISO(since), UntilIso: planspec.FormatISO(until), Stated: stated,
		Waits: hold.Waits, Agent: agentOf(text), Error: text}
	// The same try again: the count and the error it started with, so that its
	// prompt is the one it had.
	run.Tries = t.try - 1
	run.Error = previousError(run, t.try-1)
	run.Status = planspec.StatusPending
	run.Phase = planspec.PhaseWaiting
	run.Agent.FinishedIso = planspec.FormatISO(m.now)
	run.Agent.Limit = hold
	m.progress = true
	m.journal(Entry{Event: "limit-wait", Step: t.step, Try: t.try, Reason: text,
		Detail: map[string]any{"until": hold.UntilIso, "stated": stated, "waits": hold.Waits}})
	m.log(slog.LevelWarn, "every agent is out of quota: the same try runs again when the limit resets", "step", t.step, "try", t.try,
		"until", hold.UntilIso, "stated", stated)
	if first {
		how := "the time the agent named"
		if !stated {
			how = fmt.Sprintf("no time named: backing off, for at most limitWait %s", wait)
		}
		m.notifyEvent(t.step, t.try, planspec.ReportMilestone, EventWaitingLimit,
			fmt.Sprintf("%s; waiting until %s (%s)", text, hold.UntilIso, how), fmt.Sprintf("try %d runs again then; no try is spent", t.try))
	}
	m.markDirty("usage limit")
	return true
}

// liftLimit ends the wait of a try that got past its limit (a verdict came), or
// whose limit outlasted limitWait: the user hears of it once.
func (m *Machine) liftLimit(t *tryExit) {
	run := m.st.Run(t.step)
	if run.Agent == nil || run.Agent.Limit.SinceIso == "" {
		return
	}
	hold := run.Agent.Limit
	run.Agent.Limit = planspec.LimitHold{}
	out := fmt.Sprintf("usage limit over after %d waits since %s: try %d ran", hold.Waits, hold.SinceIso, t.try)
	if len(t.limits) > 0 {
		out = fmt.Sprintf("usage limit outlasted limitWait %s: try %d fails", LimitWait(m.st, t.step), t.try)
	}
	m.journal(Entry{Event: "limit-over", Step: t.step, Try: t.try, Reason: out})
	m.notifyEvent(t.step, t.try, planspec.ReportMilestone, EventWaitingLimit, out, "the try's verdict follows")
}

// previousError is the error try n ended with, which the try after it was
// started with; nil for the first try.
func previousError(run *planspec.StepRun, n int) *string {
	if n <= 0 || run.Agent == nil {
		return nil
	}
	for i := len(run.Agent.Errors) - 1; i >= 0; i-- {
		if e := run.Agent.Errors[i]; e.Try == n {
			s := e.Error
			return &s
		}
	}
	return nil
}

// agentOf is the agent a preset's message names ("claude: …").
func agentOf(text string) string {
	for i := 0; i < len(text) && i < 40; i++ {
		if text[i] == ':' {
			return text[:i]
		}
	}
	return ""
}

// keepSession records the session the agent named, where the step resumes.
func (m *Machine) keepSession(t *tryExit) {
	if t.session.ID == "" || !ResumeOn(m.st, t.step) {
		return
	}
	if run := m.st.Run(t.step); run.Agent != nil && run.Agent.Session != t.session {
		run.Agent.Session = t.session
		m.markDirty("agent session")
	}
}

// resumes is the session a try of step id about to start continues: a retry of
// a step with resume: true whose agent named its session. Anything else starts
// afresh, as the original does.
func (m *Machine) resumes(id string) planspec.AgentSession {
	run := m.st.Run(id)
	if !ResumeOn(m.st, id) || run.Agent == nil || run.Agent.Session.ID == "" || run.Tries == 0 || run.Error == nil {
		return planspec.AgentSession{}
	}
	return run.Agent.Session
}

func (m *Machine) notifyEvent(step string, try int, status, event, output, next string) {
	m.notify(step, try, "stepseq", status, output, next)
	if n, ok := m.out[len(m.out)-1].(Notify); ok {
		n.Note.Event = event
		if sv := m.st.Settings.SummaryValues; (event == EventPlanDone || event == EventPlanBlocked) && len(sv) > 0 {
			n.Note.Summary = maps.Clone(sv)
			n.Note.Output += "; summary: " + SummaryLine(sv)
		}
		if event == EventPlanDone || event == EventPlanBlocked || event == EventBudget {
			withCost(&n.Note, m.st.Settings.Spend)
		}
		m.out[len(m.out)-1] = n
	}
}

// SummaryLine is a plan's summary in words, for a report's output: name=value
// in name order, each value as JSON (a string as it is).
func SummaryLine(values map[string]any) string {
	parts := make([]string, 0, len(values))
	for _, name := range slices.Sorted(maps.Keys(values)) {
		v, ok := values[name].(string)
		if !ok {
			b, _ := json.Marshal(values[name])
			v = string(b)
		}
		parts = append(parts, name+"="+FirstChars(v, 200))
	}
	return strings.Join(parts, ", ")
}
