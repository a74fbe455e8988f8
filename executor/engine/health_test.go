package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/internal/testfs"
)

func TestHeartbeat_Healthy(t *testing.T) {
	const bound = time.Minute
	at := func(s int) time.Time { return logT0.Add(time.Duration(s) * time.Second) }
	tests := []struct {
		name  string
		steps func(h *Heartbeat)
		now   time.Time
		want  string // "" healthy, else words of the reason
	}{
		{"never turned, nothing to do", func(h *Heartbeat) {}, at(3600), ""},
		{"idle for an hour after a turn", func(h *Heartbeat) { h.Busy(at(0)); h.Turned(at(1)) }, at(3600), ""},
		{"a short turn in progress", func(h *Heartbeat) { h.Busy(at(0)) }, at(59), ""},
		{"stuck in one turn", func(h *Heartbeat) { h.Busy(at(0)) }, at(61), "stuck in one turn for 1m1s"},
		{"work waiting, within the bound", func(h *Heartbeat) { h.Turned(at(0)); h.Wanted(at(10)) }, at(70), ""},
		{"work left untaken", func(h *Heartbeat) { h.Turned(at(0)); h.Wanted(at(10)) }, at(71), "left work untaken for 1m1s"},
		{"the oldest work counts", func(h *Heartbeat) { h.Wanted(at(0)); h.Wanted(at(50)) }, at(61), "untaken for 1m1s"},
		{"work taken", func(h *Heartbeat) { h.Wanted(at(0)); h.Busy(at(1)); h.Turned(at(2)) }, at(600), ""},
		{"work handed over during a turn", func(h *Heartbeat) { h.Busy(at(0)); h.Wanted(at(1)); h.Turned(at(2)) }, at(62), "untaken"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Heartbeat
			tt.steps(&h)
			err := h.Check(tt.now, bound)
			if got := h.Healthy(tt.now, bound); got != (tt.want == "") {
				t.Fatalf("Healthy = %v, Check = %v; want %q", got, err, tt.want)
			}
			if tt.want != "" && !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check = %q, want it to say %q", err, tt.want)
			}
		})
	}
}

// TestHeartbeat_LoopBlockedOnAFIFO runs a loop whose turn opens a FIFO the old
// way, blocking: the heartbeat turns unhealthy past the bound, and healthy again
// once the turn ends.
func TestHeartbeat_LoopBlockedOnAFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "a.yaml")
	testfs.Mkfifo(t, fifo)
	var h Heartbeat
	inputs := make(chan string)
	turned := make(chan struct{})
	go func() { // the loop
		for path := range inputs {
			h.Busy(time.Now())
			if f, err := os.Open(path); err == nil { // blocks until a writer opens the FIFO
				f.Close()
			}
			h.Turned(time.Now())
			turned <- struct{}{}
		}
	}()
	defer close(inputs)
	const bound = 20 * time.Millisecond
	h.Wanted(time.Now())
	inputs <- fifo
	waitFor(t, func() bool { return !h.Healthy(time.Now(), bound) })
	if err := h.Check(time.Now(), bound); !strings.Contains(err.Error(), "stuck in one turn") {
		t.Errorf("Check = %v", err)
	}
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0) // lets the loop's open return
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	<-turned
	if err := h.Check(time.Now(), bound); err != nil {
		t.Errorf("after the turn: %v", err)
	}
	if h.LastTurn().IsZero() {
		t.Error("LastTurn not recorded")
	}
}
