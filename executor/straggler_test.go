package executor

import (
	"testing"

	"github.com/stepseq/stepseq/planspec"
)

// A background child the agent leaves in its group, ignoring SIGTERM, is ended
// before the step is judged: when the verdict is on disk, the child is gone.
func TestCheck_StragglerEndsWithItsStep(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"straggler:child.pid write:out","requiredOutputs":["out"]`))
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	if r := w.read().Run("s1"); r.Status != planspec.StatusDone || r.Tries != 1 {
		t.Fatalf("s1 = %s after %d tries", r.Status, r.Tries)
	}
	if pid := w.waitPID("child.pid"); processExists(pid) {
		t.Errorf("the agent's child %d outlived its step", pid)
	}
}

func TestSidecar_StragglerEndsWithItsStep(t *testing.T) {
	w := newTestWS(t, plan("",
		`"instruction":"straggler:child.pid write:out","requiredOutputs":["out"]`,
		`"instruction":"straggler:second.pid waitfor:release"`))
	run := w.startSidecar(SidecarOptions{})
	w.waitState("s1 judged", func(st *planspec.State) bool { return st.Run("s1").Status == planspec.StatusDone })
	if pid := w.waitPID("child.pid"); processExists(pid) {
		t.Errorf("s1's child %d outlived its step", pid)
	}
	// The sidecar stops while s2 runs: it does not exit while the group lives.
	second := w.waitPID("second.pid")
	run.stop(t)
	if processExists(second) {
		t.Errorf("s2's child %d outlived the sidecar", second)
	}
}
