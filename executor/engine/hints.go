package engine

import "regexp"

// stepCommand is a stepseq command on a step that a hint names.
var stepCommand = regexp.MustCompile("(stepseq (?:retry|trigger) [A-Za-z0-9._-]+)")

// commandsForRun makes the stepseq commands a hint names reach run, a named
// one: `stepseq retry stuck` alone would act on the workspace's own run.
func commandsForRun(hint, run string) string {
	return stepCommand.ReplaceAllString(hint, "${1} --run "+run)
}
