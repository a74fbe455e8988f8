package engine

import (
	"os"
	"strings"
	"sync/atomic"
	"testing"
)

// OnReady is the start's end: called once, from the loop, after the first pass
// and before the ready record; the passes after it do not call it again.
func TestSidecar_OnReadyOnceBeforeTheReadyRecord(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"write:out","when":"exists(\"gate\")"`))
	var calls atomic.Int32
	var journalAtCall atomic.Value
	w.startSidecar(SidecarOptions{OnReady: func() {
		calls.Add(1)
		data, _ := os.ReadFile(w.path(".stepseq/journal.jsonl"))
		journalAtCall.Store(string(data))
	}})
	w.writeFile("gate", "")
	w.waitState("DONE", done)
	if n := calls.Load(); n != 1 {
		t.Errorf("OnReady called %d times, want once", n)
	}
	j, _ := journalAtCall.Load().(string)
	if !strings.Contains(j, `"event":"decide"`) || strings.Contains(j, `"event":"ready"`) {
		t.Errorf("journal when OnReady was called, want the first pass's records and no ready record yet:\n%s", j)
	}
}
