package engine

import "testing"

// A named run's hints name it: `stepseq retry stuck` alone fails, or acts on
// the workspace's own run.
func TestCommandsForRun(t *testing.T) {
	for in, want := range map[string]string{
		"stepseq retry stuck": "stepseq retry stuck --run side",
		"a report from the worker clears it; or stepseq retry s1": "a report from the worker clears it; or stepseq retry s1 --run side",
		"waiting for the worker":                                  "waiting for the worker",
		"stepseq budget usd=+2":                                   "stepseq budget usd=+2 --run side",
		"raise it: stepseq budget wall=+1h, or close the run":     "raise it: stepseq budget wall=+1h --run side, or close the run",
	} {
		if got := commandsForRun(in, "side"); got != want {
			t.Errorf("commandsForRun(%q) = %q, want %q", in, got, want)
		}
	}
}
