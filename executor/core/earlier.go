package core

import "github.com/stepseq/stepseq/planspec"

// runAnew is what a step's record keeps when the step runs anew (a re-run, a
// loop's next round): its spend (keptSpend), and the tries of the run that
// ends, so that the new run's first try sets their logs aside as a run even
// when they printed nothing. A step reset again before it ran keeps the count
// of the run it still has to set aside.
func runAnew(a *planspec.AgentRecord, tries int) *planspec.AgentRecord {
	earlier := tries
	if earlier == 0 && a != nil {
		earlier = a.EarlierTries
	}
	kept := keptSpend(a)
	if earlier == 0 {
		return kept
	}
	if kept == nil {
		kept = &planspec.AgentRecord{}
	}
	kept.EarlierTries = earlier
	return kept
}
