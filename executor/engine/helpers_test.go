package engine

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/planspec"
)

// atoi reads a pid a test agent wrote; 0 when there is none yet.
func atoi(s string) int {
	n, _ := strconv.Atoi(strings.TrimSpace(s))
	return n
}

// processExists reports whether pid names a live (not zombie) process.
func processExists(pid int) bool {
	_, err := proc.StartTicks(pid)
	return err == nil
}

// parse builds a state from JSON for the table tests.
func parse(t *testing.T, js string) *planspec.State {
	t.Helper()
	st, err := planspec.ParseState(strings.NewReader(js), "state.json")
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return st
}

// claudeJSON is a result line as `claude -p --output-format json` prints it.
func claudeJSON(isError bool, result string) string {
	return fmt.Sprintf(`{"type":"result","subtype":"success","is_error":%t,"duration_ms":12,"num_turns":1,"result":%q,"session_id":"s1","total_cost_usd":0.01}`+"\n", isError, result)
}

// judgeExit judges the end of agent a's try as the machine does: the agent's own
// reading of its output, then the exit (core.JudgeExit). A try that ended well
// is OK here; its outputs and check are the machine's to verify.
func judgeExit(a proc.Agent, exit core.Exit) core.Verdict {
	failed, _ := a.Judge(exit)
	if v, ended := core.JudgeExit(failed, exit); ended {
		return v
	}
	return core.Verdict{OK: true}
}
