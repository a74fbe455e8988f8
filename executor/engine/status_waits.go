package engine

import (
	"fmt"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/planspec"
)

// heldWords words what step d.Step waits for when the decision d holds it back
// before its start: ok is false for any other decision.
func heldWords(st *planspec.State, d core.Decision, now time.Time) (words string, ok bool) {
	if d.Step == "" {
		return "", false
	}
	switch d.Action {
	case core.Gated:
		return d.Reason, true // "waiting for when: …", the core's own words
	case core.Delayed:
		delay := "stepDelayMinutes"
		if _, clamped := st.StepDelay(); clamped {
			delay = st.StepDelayReason()
		}
		return "waiting for " + delay + " until " + ClockTime(d.At, now), true
	case core.LimitWaiting:
		run := st.Run(d.Step)
		return fmt.Sprintf("waiting for a usage limit to reset until %s, then try %d runs again: %s",
			ClockTime(d.At, now), run.Tries+1, run.Agent.Limit.Error), true
	}
	return "", false
}

// markWaiting shows each step that held names as waiting, with what it waits
// for, where it would otherwise show as planned (or failed, its retry held):
// a step the plan reached is not one it has yet to reach.
func markWaiting(steps []StepReport, held map[string]string) {
	if len(held) == 0 {
		return
	}
	for i := range steps {
		s := &steps[i]
		words, ok := held[s.ID]
		if !ok {
			continue
		}
		switch s.Phase {
		case planspec.PhasePlanned, core.PhaseFailed, planspec.PhaseWaiting:
			s.Phase, s.Waits = planspec.PhaseWaiting, words
		}
	}
}
