package proc

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/store"
)

// The try locks are a pool: a chain of steps reuses one file; a file an agent
// holds, or whose record is of a try still to judge, is not reused; a held file
// naming the step refuses a second agent of it; a shorter record replaces a
// longer one whole.
func TestTryLock_Pool(t *testing.T) {
	ws := store.Workspace{Dir: t.TempDir()}
	none := func(TryRecord) bool { return false }
	take := func(rec TryRecord, needed func(TryRecord) bool) *HeldTry {
		t.Helper()
		h, err := TakeTryLock(ws, rec, needed)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	for i, step := range []string{"a", "b", "c"} {
		h := take(TryRecord{Step: step, Try: 1, Started: "t" + step}, none)
		if h.File.Name() != ws.TryLockPath(0) {
			t.Fatalf("step %d took %s, want the pool's first file again", i, h.File.Name())
		}
		h.Ended(core.Exit{}, false)
	}
	long := strings.Repeat("x", 2*TryRecordSize)
	held := take(TryRecord{Step: long, Try: 1, Started: "t"}, none) // an agent runs: file 0 held
	needC := func(r TryRecord) bool { return r.Step == "c" }
	if h := take(TryRecord{Step: "d", Try: 1, Started: "td"}, needC); h.File.Name() != ws.TryLockPath(1) {
		t.Fatalf("d took %s beside a held file, want the next one", h.File.Name())
	} else {
		h.Release()
	}
	needD := func(r TryRecord) bool { return r.Step == "d" }
	e := take(TryRecord{Step: "e", Try: 1, Started: "te"}, needD)
	if e.File.Name() != ws.TryLockPath(2) {
		t.Fatalf("e took %s, want a new file: 0 is held, 1 holds d's try still to judge", e.File.Name())
	}
	if s := ProbeTry(ws, "d", 1, "td"); !s.Recorded || s.Alive {
		t.Errorf("d's record after e's take: %+v, want recorded, not alive", s)
	}
	if s := ProbeTry(ws, long, 1, "t"); !s.Alive || !s.Recorded {
		t.Errorf("the held try: %+v, want alive and recorded", s)
	}

	defer func(d time.Duration) { TryLockTake = d }(TryLockTake)
	TryLockTake = 10 * time.Millisecond
	if _, err := TakeTryLock(ws, TryRecord{Step: "e", Try: 2, Started: "te2"}, none); !errors.Is(err, ErrAgentAlive) {
		t.Errorf("a second try of e while e's lock is held: %v, want ErrAgentAlive", err)
	}
	e.Ended(core.Exit{Code: 3}, false)
	// e's next try overwrites e's own record (file 2), though file 0 is free too.
	held.Ended(core.Exit{}, false)
	e2 := take(TryRecord{Step: "e", Try: 2, Started: "te2"}, none)
	if e2.File.Name() != ws.TryLockPath(2) {
		t.Errorf("e's next try took %s, want its own record's file", e2.File.Name())
	}
	e2.Release()
	// The long record is replaced by a short one, read back whole.
	f := take(TryRecord{Step: "f", Try: 1, Started: "tf"}, none)
	f.Ended(core.Exit{Code: 4}, false)
	if s := ProbeTry(ws, "f", 1, "tf"); !s.Recorded || !s.Exited || s.Code != 4 {
		t.Errorf("f over the long record: %+v, want recorded, exited 4", s)
	}
	if n := len(mustReadDir(t, ws.RunMeta("agents"))); n != 3 {
		t.Errorf("%d files in the pool, want 3", n)
	}
}

func mustReadDir(t *testing.T, dir string) []os.DirEntry {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}
