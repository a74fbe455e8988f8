package engine

import (
	"os"
	"strconv"
	"testing"

	"github.com/stepseq/stepseq/planspec"
)

// A child the agent started in a session of its own (setsid), ignoring SIGTERM,
// ends with the step too, and is reaped: it is reparented to stepseq, the
// subreaper of what its agents start.
func TestCheck_DaemonEndsWithItsStep(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"daemon:child.pid write:out","requiredOutputs":["out"]`))
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	if r := w.read().Run("s1"); r.Status != planspec.StatusDone || r.Tries != 1 {
		t.Fatalf("s1 = %s after %d tries", r.Status, r.Tries)
	}
	pid := w.waitPID("child.pid")
	if processExists(pid) {
		t.Errorf("the agent's setsid child %d outlived its step", pid)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
		t.Errorf("the agent's setsid child %d was not reaped", pid)
	}
}
