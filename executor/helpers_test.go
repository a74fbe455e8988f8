package executor

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/planspec"
)

// atoi reads a pid a test agent wrote; 0 when there is none yet.
func atoi(s string) int {
	n, _ := strconv.Atoi(strings.TrimSpace(s))
	return n
}

// processExists reports whether pid names a live (not zombie) process.
func processExists(pid int) bool {
	_, err := StartTicks(pid)
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
