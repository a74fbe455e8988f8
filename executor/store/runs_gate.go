package store

import "github.com/stepseq/stepseq/planspec"

// awaiting is the gate st waits on with step cur at its cursor: "plan" for
// the plan's, cur for the step's own, "" when none waits.
func awaiting(st *planspec.State, cur string) string {
	if st.Settings.Gate.Waiting() {
		return "plan"
	}
	if run := st.StepRuns[cur]; run != nil && run.Gate.Waiting() {
		return cur
	}
	return ""
}
