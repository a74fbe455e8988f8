package engine

import "testing"

// A named run's hints name it: `stepseq retry stuck` alone fails, or acts on
// the workspace's own run.
func TestCommandsForRun(t *testing.T) {
	for in, want := range map[string]string{
		"stepseq retry stuck": "stepseq retry stuck --run side",
		"a report from the worker clears it; or stepseq retry s1": "a report from the worker clears it; or stepseq retry s1 --run side",
		"waiting for the worker":                                  "waiting for the worker",
	} {
		if got := commandsForRun(in, "side"); got != want {
			t.Errorf("commandsForRun(%q) = %q, want %q", in, got, want)
		}
	}
}
