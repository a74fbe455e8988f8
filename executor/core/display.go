package core

import (
	"strings"

	"github.com/stepseq/stepseq/planspec"
)

// What the faces show of a step: status, the page, MCP and the command line all
// ask here, so that a step reads the same wherever a person looks.

// Display phases beyond the record's (planspec.Phase*).
const (
	// PhaseFailed: the step's last try failed and its retry is due.
	PhaseFailed = "failed"
	// PhaseRunning: a dispatched step of a plan whose workers do not report;
	// nobody accepted it, its agent just runs.
	PhaseRunning = "running"
)

// DisplayPhase is step id's phase as a person reads it. A record the original
// wrote has none: its status says it (a FAILED one is "failed", blocked or not:
// its blocker, StepBlocker, tells). Nobody is told a step is in progress before its worker
// said so: a dispatched step shows "dispatching", or "running" when the plan
// takes no reports.
func DisplayPhase(st *planspec.State, id string) string {
	if g, ok := WaitingGate(st); ok && g.Plan && g.Step == id {
		return planspec.PhaseAwaitingApproval // the plan's gate holds it
	}
	run := st.StepRuns[id]
	if run == nil {
		return planspec.PhasePlanned
	}
	phase := run.Phase
	if phase == "" {
		switch run.Status {
		case planspec.StatusInProgress:
			phase = planspec.PhaseDispatching
		case planspec.StatusDone:
			phase = planspec.PhaseDone
		default:
			phase = planspec.PhasePlanned
		}
	}
	if run.Status == planspec.StatusFailed && phase == planspec.PhasePlanned {
		return PhaseFailed
	}
	if !st.UsesReports(id) && (phase == planspec.PhaseDispatching || phase == planspec.PhaseInProgress) {
		return PhaseRunning
	}
	return phase
}

// StepBlocker is the blocker that is step id's: the first that begins "id: ", as
// every blocker stepseq and the original record does. A blocker that only
// mentions id (step b in "build: max retries (3) exceeded") is another step's.
func StepBlocker(st *planspec.State, id string) (string, bool) {
	for _, b := range st.Blockers {
		if isBlockerOf(b, id) {
			return b, true
		}
	}
	return "", false
}

func isBlockerOf(blocker, id string) bool { return strings.HasPrefix(blocker, id+": ") }
