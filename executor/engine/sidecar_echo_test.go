package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// TestSidecar_OwnChangesAreNoActivity: what the sidecar itself changes in the
// workspace (its journal, its lock, the try locks, a report file it took) is no
// activity for the watcher's settle window, so the change a person or a worker
// makes a moment later is the first after a quiet window, taken at once. The
// window is an hour: a change held by it would never be seen within the test's
// deadline.
func TestSidecar_OwnChangesAreNoActivity(t *testing.T) {
	t.Run("a gate after a step's end", func(t *testing.T) {
		w := newTestWS(t, "")
		w.write(plan("", `"instruction":"exit:0"`, `"instruction":"exit:0","when":"exists(\"approved.txt\")"`))
		w.startSidecar(SidecarOptions{Settle: time.Hour})
		w.waitState("s1 DONE", func(st *planspec.State) bool { return st.Run("s1").Status == planspec.StatusDone })
		w.waitJournal(`"event":"verdict"`) // the journal, written beside the state
		w.writeFile("approved.txt", "yes")
		w.waitState("DONE", done)
	})
	t.Run("a report after the one taken before it", func(t *testing.T) {
		w := newTestWS(t, "")
		w.writeFile("out/.keep", "") // the release below is no change the sidecar watches
		w.write(plan(`"stepseq":{"reports":"required"}`, `"instruction":"waitfor:out/release"`))
		w.startSidecar(SidecarOptions{Settle: time.Hour})
		w.waitState("s1 dispatched", func(st *planspec.State) bool { return st.Run("s1").Phase == planspec.PhaseDispatching })
		dir := store.Workspace{Dir: w.dir}.ReportsDir("s1")
		for i, status := range []string{planspec.ReportAccepted, planspec.ReportMilestone, planspec.ReportDone} {
			name := filepath.Join(dir, fmt.Sprintf("1-%d.yaml", i))
			report := fmt.Sprintf("status: %s\nsummary: report %d\nevidence: e\nrisk: none\nnext: n\n", status, i)
			if err := os.WriteFile(filepath.Join(dir, ".tmp"), []byte(report), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(dir, ".tmp"), name); err != nil {
				t.Fatal(err)
			}
			// Taken: recorded in the state, then removed by the sidecar.
			waitFor(t, func() bool { _, err := os.Stat(name); return errors.Is(err, os.ErrNotExist) })
		}
		st := w.waitState("three reports", func(st *planspec.State) bool { return len(st.Run("s1").Reports) == 3 })
		if got := st.Run("s1").Reports[2].Summary; got != "report 2" {
			t.Errorf("last report %q, want report 2", got)
		}
		w.writeFile("out/release", "")
		w.waitState("DONE", done)
	})
}
