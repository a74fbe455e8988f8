package notify

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

func segments(t *testing.T, ws string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(ws, ".stepseq", "outbox", "*"+segmentSuffix))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Past MaxOutboxBytes the oldest segments go; the stuck sink hears how many it
// lost, through OnGiveUp, then gets the rest in order.
func TestOutbox_CapDropsOldest(t *testing.T) {
	ws := t.TempDir()
	fake := &fakeSink{gate: make(chan struct{}), entered: make(chan string, 1)}
	var mu sync.Mutex
	var dropped []error
	const segBytes, maxBytes = 4 << 10, 16 << 10
	n, err := New(Config{Dir: ws, Sinks: []SinkConfig{fake.config("stuck")}, Logger: testLogger(t),
		Timeout: time.Hour, SegmentBytes: segBytes, MaxOutboxBytes: maxBytes,
		OnGiveUp: func(_ string, _ Notice, err error) { mu.Lock(); dropped = append(dropped, err); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	defer closeNotifier(t, n)
	// The first report is in flight (its delivery holds at the gate) before the
	// flood: the cap drops the oldest reports waiting, never the one in flight.
	ids := emitN(t, n, 1, "s")
	select {
	case id := <-fake.entered:
		if id != ids[0] {
			t.Fatalf("first in flight %s, want %s", id, ids[0])
		}
	case <-time.After(time.Minute):
		t.Fatal("the first report's delivery did not begin within a minute")
	}
	ids = append(ids, emitN(t, n, 499, "s")...)
	for range 100 {
		if got := n.OutboxBytes(); got > maxBytes+segBytes {
			t.Fatalf("outbox %d bytes, cap %d", got, maxBytes+segBytes)
		}
		ids = append(ids, emitN(t, n, 1, "s")...)
	}
	close(fake.gate)
	eventually(t, "the stuck sink caught up", func() bool {
		got := fake.ids()
		return len(got) > 0 && n.ob.pending(sinkID("test", "stuck")) == 0
	})
	got := fake.ids()
	if got[0] != ids[0] {
		t.Errorf("first delivered %s, want the one in flight %s", got[0], ids[0])
	}
	if len(got) >= 600 {
		t.Fatalf("delivered %d: nothing dropped", len(got))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dropped) == 0 || !errors.Is(dropped[0], ErrDropped) {
		t.Fatalf("give-ups %v, want ErrDropped", dropped)
	}
	// What is delivered after the drop is in order and runs to the last report.
	if !slices.IsSorted(got) || got[len(got)-1] != ids[len(ids)-1] {
		t.Errorf("delivered out of order or short: %v", got)
	}
}

// Segments every sink has passed are deleted; the one appended to stays.
func TestOutbox_CompactsDelivered(t *testing.T) {
	ws := t.TempDir()
	n, err := New(Config{Dir: ws, Logger: testLogger(t), SegmentBytes: 2 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer closeNotifier(t, n)
	emitN(t, n, 100, "s")
	eventually(t, "the feed has every report", func() bool { r, _ := Recent(ws, 200); return len(r) == 100 })
	eventually(t, "one segment left", func() bool { return len(segments(t, ws)) == 1 })
	if b := n.OutboxBytes(); b > 2<<10 {
		t.Errorf("outbox holds %d bytes after delivery", b)
	}
}

// A record cut short by a crash is removed when the outbox opens, and numbering
// goes on from the last whole record.
func TestOutbox_CutsPartialRecord(t *testing.T) {
	ws := t.TempDir()
	stuck := &fakeSink{gate: make(chan struct{})}
	n, err := New(Config{Dir: ws, Logger: testLogger(t), Sinks: []SinkConfig{stuck.config("x")}, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	emitN(t, n, 3, "s")
	closeNotifier(t, n)
	seg := segments(t, ws)
	f, err := os.OpenFile(seg[len(seg)-1], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"seq":4,"report":{"id":"half`)
	f.Close()

	fake := &fakeSink{}
	n, err = New(Config{Dir: ws, Logger: testLogger(t), Sinks: []SinkConfig{fake.config("x")}})
	if err != nil {
		t.Fatal(err)
	}
	defer closeNotifier(t, n)
	emitN(t, n, 1, "s")
	eventually(t, "four delivered", func() bool { return len(fake.ids()) == 4 })
	data, err := os.ReadFile(seg[len(seg)-1])
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		var rec record
		if err := json.Unmarshal(line, &rec); err != nil || rec.Seq != uint64(i+1) {
			t.Errorf("line %d: %q (%v)", i+1, line, err)
		}
	}
}

// Emit appends without an fsync; Sync makes everything appended durable at
// once, and a new segment starts only once the one before is synced.
func TestOutbox_SyncsOnSync(t *testing.T) {
	ws := t.TempDir()
	n, err := New(Config{Dir: ws, Logger: testLogger(t), SegmentBytes: 1 << 10, MaxOutboxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer closeNotifier(t, n)
	unsynced := func() bool {
		n.ob.mu.Lock()
		defer n.ob.mu.Unlock()
		return n.ob.unsynced
	}
	emitN(t, n, 3, "s")
	if !unsynced() {
		t.Fatal("Emit synced the outbox itself")
	}
	if err := n.Sync(); err != nil {
		t.Fatal(err)
	}
	if unsynced() {
		t.Fatal("Sync left records unsynced")
	}
	// The segment appended to; the one before may be gone already once every
	// sink has passed it, so the test follows the active one, not a count.
	active := func() string {
		n.ob.mu.Lock()
		defer n.ob.mu.Unlock()
		return n.ob.segs[len(n.ob.segs)-1].path
	}
	first := active()
	for i := 0; active() == first; i++ {
		if i == 100 {
			t.Fatal("100 reports and no new segment of 1 KiB")
		}
		emitN(t, n, 1, "s")
	}
	// The new segment's record waits for Sync like any other.
	if !unsynced() {
		t.Fatalf("new segment %s: its record is synced before Sync", active())
	}
	if err := n.Sync(); err != nil {
		t.Fatal(err)
	}
	if unsynced() {
		t.Fatal("Sync left the new segment's record unsynced")
	}
}

// A notifier that holds its reports gives its sinks none until Publish, and
// then every one emitted so far, in order; its outbox has them all before.
func TestOutbox_HeldUntilPublished(t *testing.T) {
	ws := t.TempDir()
	n, err := New(Config{Dir: ws, Logger: testLogger(t), HoldUntilPublished: true})
	if err != nil {
		t.Fatal(err)
	}
	defer closeNotifier(t, n)
	ids := emitN(t, n, 3, "s")
	for _, s := range n.sinks {
		_, _, _, _, due, err := n.ob.locate(s.id, new(uint64))
		if err != nil || due {
			t.Fatalf("sink %s: a report is due before Publish (err %v)", s.id, err)
		}
	}
	if got := n.ob.nextSeq(); got != 4 {
		t.Fatalf("the outbox's next record is %d, want 4: the three are recorded", got)
	}
	n.Publish()
	eventually(t, "the three in the feed", func() bool {
		got, _ := Recent(ws, 10)
		var gotIDs []string
		for _, r := range got {
			gotIDs = append(gotIDs, r.ID)
		}
		return slices.Equal(gotIDs, ids)
	})
}
