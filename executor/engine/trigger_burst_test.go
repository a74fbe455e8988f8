package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// burstSize is the burst of issue 12: ten thousand triggers queued for one step.
const burstSize = 10_000

// queueBurst writes n triggers for step into the trigger folder, each atomically
// as WriteTrigger does, under names of its own so that none overwrites another.
func queueBurst(tb testing.TB, ws store.Workspace, step string, n int) {
	tb.Helper()
	dir := ws.TriggersDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	data, _ := json.Marshal(core.Trigger{Step: step, From: "trigger", At: planspec.FormatISO(time.Now())})
	for i := range n {
		name := fmt.Sprintf("%019d-%s-%06d.json", i, step, i)
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			tb.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			tb.Fatal(err)
		}
	}
}

// journalSince is the journal's records after the last one of event, none while
// it has no such record; "": all of them. The sidecar says Ready before its ready
// record is in: what came before (a check's launches of the same steps) must not
// pass for what came after.
func (w *testWS) journalSince(event string) []core.Entry {
	w.t.Helper()
	var out []core.Entry
	found := event == ""
	for _, e := range w.journal() {
		if e.Event == event {
			out, found = out[:0], true
			continue
		}
		out = append(out, e)
	}
	if !found {
		return nil
	}
	return out
}

// checkBurst checks that the burst for s1 made one trigger record, one write and
// one launch of s1.
func checkBurst(t *testing.T, entries []core.Entry) {
	t.Helper()
	triggers, launches, writes := 0, 0, 0
	inRerun := false
	for _, e := range entries {
		switch {
		case e.Event == "trigger" && e.Step == "s1":
			triggers++
			inRerun = true
			if n, _ := e.Detail["count"].(float64); int(n) != burstSize {
				t.Errorf("trigger record counts %v triggers, want %d", e.Detail["count"], burstSize)
			}
		case e.Event == "write" && inRerun:
			writes++
		case e.Event == "launch" && e.Step == "s1":
			launches++
			inRerun = false
		}
	}
	if triggers != 1 || writes != 1 || launches != 1 {
		t.Errorf("%d triggers for s1: %d trigger records, %d state writes before the launch, %d launches of s1; want 1, 1, 1",
			burstSize, triggers, writes, launches)
	}
}

// Ten thousand triggers queued before the sidecar starts are one re-run.
func TestSidecar_TriggerBurstQueuedBeforeStart(t *testing.T) {
	t.Parallel()
	w := newTestWS(t, plan("", `"instruction":"write:a"`, `"instruction":"write:b"`))
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	queueBurst(t, w.chain().WS, "s1", burstSize)
	run := w.startSidecar(SidecarOptions{})
	t.Cleanup(func() {
		if t.Failed() {
			data, _ := os.ReadFile(w.path(".stepseq/journal.jsonl"))
			t.Logf("%d triggers left in the folder; the journal:\n%s", countDir(t, w.path(".stepseq/triggers")), data)
		}
	})
	waitFor(t, func() bool {
		for _, e := range w.journalSince("ready") {
			if e.Event == "launch" && e.Step == "s2" {
				return true
			}
		}
		return false
	})
	w.waitState("DONE again", func(st *planspec.State) bool { return done(st) && st.Run("s2").Tries == 1 })
	checkBurst(t, w.journalSince("ready"))
	if n := countDir(t, w.path(".stepseq/triggers")); n != 0 {
		t.Errorf("%d triggers left in the folder", n)
	}
	t.Logf("longest turn of the loop: %s", run.LongestTurn())
}

// Ten thousand triggers written while the sidecar runs are one re-run too.
func TestSidecar_TriggerBurstWhileRunning(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"write:a"`, `"instruction":"write:b"`))
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	// A writer stalled longer than the quiet window, or slower than the hold (a
	// loaded machine: under -race at load 30 on two cores, ten thousand triggers
	// take the writer well over the default 30 s hold), would split the burst:
	// the test's windows are wide.
	run := w.startSidecar(SidecarOptions{TriggerQuiet: 5 * time.Second, TriggerHold: time.Hour})
	queueBurst(t, w.chain().WS, "s1", burstSize)
	// The burst is acted on once its drain is in: the trigger record says so. The
	// folder is not polled meanwhile: listing ten thousand files every few
	// milliseconds takes the CPU the drain needs.
	w.waitJournal(`"event":"trigger","step":"s1"`)
	if n := countDir(t, w.path(".stepseq/triggers")); n != 0 {
		t.Fatalf("%d triggers still queued once the burst was acted on: it was drained in parts", n)
	}
	// A last trigger, for s2, queued once the burst is drained: when it is acted
	// on, every drain of the burst has been.
	if err := WriteTrigger(w.chain().WS, core.Trigger{Step: "s2", From: "trigger"}); err != nil {
		t.Fatal(err)
	}
	w.waitJournal(`"event":"trigger","step":"s2"`)
	w.waitState("DONE again", done)
	checkBurst(t, w.journalSince("ready"))
	t.Logf("longest turn of the loop: %s", run.LongestTurn())
}

func countDir(t testing.TB, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return len(entries)
}

// A sidecar that exits once DONE acts on the triggers queued before it started
// first: the plan they re-run is not over.
func TestSidecar_ExitWhenDoneTakesQueuedTriggers(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"write:a"`))
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	if err := WriteTrigger(w.chain().WS, core.Trigger{Step: "s1", From: "trigger"}); err != nil {
		t.Fatal(err)
	}
	c := w.chain()
	sc, err := NewSidecar(c.Runtime, SidecarOptions{ExitWhenDone: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := logCount(w, "s1"); n != 2 {
		t.Errorf("s1 launched %d times; want 2 (the check's, the trigger's)", n)
	}
	if n := countDir(t, w.path(".stepseq/triggers")); n != 0 {
		t.Errorf("%d triggers left", n)
	}
}
