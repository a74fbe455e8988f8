package cli

import (
	"fmt"
	"os/exec"
	"strings"
)

// reportSpent reports accepted, then done with the usage val gives as
// IN/OUT/USD, as a worker whose CLI stepseq cannot read says what it spent.
func reportSpent(val string) string {
	f := strings.Split(val, "/")
	if len(f) != 3 {
		return "spent: want IN/OUT/USD, got " + val
	}
	var b strings.Builder
	for _, status := range []string{"accepted", "done"} {
		args := []string{"report", status, "--summary", "fake " + status, "--evidence", "evidence of " + status,
			"--risk", "low — a test", "--next", "the next thing"}
		if status == "done" {
			args = append(args, "--tokens-in", f[0], "--tokens-out", f[1], "--cost", f[2], "--model", "fake-model")
		}
		out, err := exec.Command("stepseq", args...).CombinedOutput()
		if err != nil {
			fmt.Fprintf(&b, "report %s refused: %s", status, out)
		}
	}
	return b.String()
}
