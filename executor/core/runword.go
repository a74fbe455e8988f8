package core

import "github.com/stepseq/stepseq/planspec"

// Where a run stands, in the one word status, runs, the live page and MCP
// say: state.json's own status has two words, the original's, and says
// IN_PROGRESS for a run that waits on a person.
const (
	RunActive  = "active"
	RunBlocked = "blocked"
	RunDone    = "done"
)

// RunWord is where the run of st stands: done once its plan is DONE; blocked
// while nothing moves it until a person acts (a blocker: a step out of tries,
// a worker's blocked report, a loop out of rounds, a rejected gate; or a
// budget reached, which stepseq budget raises); active otherwise, a step
// waiting on its gate, its when, a delay or a usage limit included.
func RunWord(st *planspec.State) string {
	switch {
	case st.Status == planspec.StatusDone:
		return RunDone
	case len(st.Blockers) > 0 || st.Settings.BudgetHeld != "":
		return RunBlocked
	}
	return RunActive
}
