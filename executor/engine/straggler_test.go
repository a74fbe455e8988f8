package engine

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

// A step that awaits its outputs leaves the agent's group alone while it waits: a
// background job the agent started makes the output after the agent exited, and
// the group is stopped once the output came (sidecar) or the window closed.
func TestSidecar_AwaitOutputsLeavesTheGroupUntilTheWaitEnds(t *testing.T) {
	t.Run("the output comes", func(t *testing.T) {
		w := newTestWS(t, plan("", `"instruction":"late:late.txt","requiredOutputs":["late.txt"],"awaitOutputs":"1m"`))
		w.startSidecar(SidecarOptions{})
		w.waitJournal(`"event":"exit"`)
		job := w.waitPID("late.txt.pid")
		if !processExists(job) {
			t.Fatal("the agent's background job was stopped when the agent exited, before its output came")
		}
		w.writeFile("late.txt.go", "")
		if r := w.waitState("DONE", done).Run("s1"); r.Tries != 1 {
			t.Errorf("tries = %d, want 1", r.Tries)
		}
		waitFor(t, func() bool { return !processExists(job) })
	})
	t.Run("the window closes", func(t *testing.T) {
		w := newTestWS(t, plan(`"stepseq":{"maxRetries":1}`, `"instruction":"late:never.txt","requiredOutputs":["never.txt"],"awaitOutputs":"300ms"`))
		w.startSidecar(SidecarOptions{})
		job := w.waitPID("never.txt.pid")
		st := w.waitState("FAILED", func(st *planspec.State) bool { return st.Run("s1").Status == planspec.StatusFailed })
		if e := deref(st.Run("s1").Error); e != "Missing required outputs: never.txt" {
			t.Errorf("error = %q", e)
		}
		waitFor(t, func() bool { return !processExists(job) })
	})
}

func TestCheck_AwaitOutputsLeavesTheGroupUntilTheWaitEnds(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"late:late.txt","requiredOutputs":["late.txt"],"awaitOutputs":"1m"`))
	ended := make(chan error, 1)
	go func() { ended <- w.check() }()
	w.waitJournal(`"event":"exit"`)
	job := w.waitPID("late.txt.pid")
	if !processExists(job) {
		t.Fatal("the agent's background job was stopped when the agent exited, before its output came")
	}
	w.writeFile("late.txt.go", "")
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	if r := w.read().Run("s1"); r.Status != planspec.StatusDone || r.Tries != 1 {
		t.Errorf("s1 = %s after %d tries", r.Status, r.Tries)
	}
	// check returns once the group is gone.
	if processExists(job) {
		t.Errorf("the background job %d outlived check", job)
	}
}
