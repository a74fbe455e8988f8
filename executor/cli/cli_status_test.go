package cli

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/internal/testwait"
	"github.com/stepseq/stepseq/executor/notify"
	"github.com/stepseq/stepseq/executor/store"
)

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, effectWait, what, cond)
}

// replaceFile writes path by rename, as stepseq writes a state.
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

const runningState = `{
  "plan": {"steps": {"build": {"title": "Build", "instruction": "build it"}}},
  "stepQueue": ["build"], "currentStep": 0,
  "stepRuns": {"build": {"status": "IN_PROGRESS", "tries": 1, "lastRunIso": "2026-02-10T21:30:00.000000+00:00",
    "stepseq": {"startedIso": "2026-02-10T21:30:00.000000+00:00"}}},
  "stepDelayMinutes": 0, "blockers": [], "artifacts": [], "status": "IN_PROGRESS"
}`

const doneState = `{
  "plan": {"steps": {"build": {"title": "Build", "instruction": "build it"}}},
  "stepQueue": ["build"], "currentStep": 1,
  "stepRuns": {"build": {"status": "DONE", "tries": 1, "lastRunIso": "2026-02-10T21:30:00.000000+00:00"}},
  "stepDelayMinutes": 0, "blockers": [], "artifacts": [], "status": "DONE"
}`

// followView is a status --follow on dir, writing to out as a terminal would
// (tty) or a pipe, with the clock under the test's control. The test holds the
// workspace's lock, as the stepseq running runningState's step does: a step
// left IN_PROGRESS with no live holder shows as interrupted, not running.
func followView(t *testing.T, dir string, out *syncBuffer, logs *syncBuffer, tty bool, now func() time.Time) *statusView {
	t.Helper()
	log := slog.New(slog.NewTextHandler(logs, nil))
	rt, err := engine.NewRuntime(filepath.Join(dir, "state.json"), log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	lock, _, err := store.TryLock(rt.WS, "watch")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Unlock() })
	rt.Now = now
	return &statusView{rt: rt, state: filepath.Join(dir, "state.json"), plans: filepath.Join(dir, "plans"), out: out,
		follow: true, tty: tty, tick: 10 * time.Millisecond, log: log}
}

// TestStatusView_Follow: --follow waits for the state file to appear; on a
// terminal it redraws one table in place, and ticks a running step's duration
// without any change to the file; it ends once the plan is DONE.
func TestStatusView_Follow(t *testing.T) {
	dir := t.TempDir()
	var clock sync.Mutex
	now := time.Date(2026, 2, 10, 21, 30, 5, 0, time.UTC)
	tick := func() time.Time {
		clock.Lock()
		defer clock.Unlock()
		now = now.Add(time.Second) // each report is a second later
		return now
	}
	var out, logs syncBuffer
	v := followView(t, dir, &out, &logs, true, tick)
	done := make(chan error, 1)
	go func() { done <- v.followChanges(context.Background(), time.Second) }()

	waitFor(t, "the wait for the state file to be logged", func() bool {
		return strings.Contains(logs.String(), "waiting for the state file to appear")
	})
	if out.String() != "" {
		t.Fatalf("printed before any state existed: %q", out.String())
	}
	replaceFile(t, filepath.Join(dir, "state.json"), runningState)
	// The duration grows with no write to the file: a redraw in place.
	waitFor(t, "two redraws of the running duration", func() bool {
		return strings.Count(out.String(), "\x1b[J") >= 2
	})
	text := out.String()
	if !strings.Contains(text, "running ") {
		t.Fatalf("no running duration in %q", text)
	}
	if !strings.Contains(text, "sidecar: live (pid ") {
		t.Errorf("the stepseq holding the workspace is not named: %q", text)
	}
	first := strings.Index(text, "plan ")
	if strings.Contains(text[:first], "\x1b[") {
		t.Fatalf("the first report starts with a cursor move: %q", text)
	}
	// Each redraw moves up over the whole last report: its 7 lines.
	if !strings.Contains(text, "\x1b[7F\x1b[J") {
		t.Fatalf("the redraw does not go up over the 7 lines of the report: %q", text)
	}

	replaceFile(t, filepath.Join(dir, "state.json"), doneState)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("follow ended with %v, want nil on DONE", err)
		}
	case <-time.After(effectWait):
		t.Fatal("follow did not end on DONE")
	}
	if !strings.HasSuffix(out.String(), "now: plan DONE\n") {
		t.Fatalf("the last report is not DONE: %q", out.String())
	}
}

// TestStatusView_FollowPipe: on a pipe, each change appends a report and a
// running step starts no timer: no report comes without a change of the file.
func TestStatusView_FollowPipe(t *testing.T) {
	dir := t.TempDir()
	replaceFile(t, filepath.Join(dir, "state.json"), runningState)
	var out, logs syncBuffer
	v := followView(t, dir, &out, &logs, false, func() time.Time { return time.Date(2026, 2, 10, 21, 31, 0, 0, time.UTC) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- v.followChanges(ctx, time.Second) }()
	waitFor(t, "the first report", func() bool { return strings.Contains(out.String(), "running 1m0s") })
	replaceFile(t, filepath.Join(dir, "state.json"), doneState)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if strings.Contains(text, "\x1b[") {
		t.Fatalf("cursor moves on a pipe: %q", text)
	}
	if n := strings.Count(text, "plan (unnamed)"); n != 2 {
		t.Fatalf("%d reports on a pipe, want 2 (one per change, no ticks): %q", n, text)
	}
}

func TestScreenRows(t *testing.T) {
	for _, tc := range []struct {
		text  string
		width int
		want  int
	}{
		{"a\nb\n", 0, 2},
		{"a\n\nb\n", 80, 3},
		{strings.Repeat("x", 100) + "\n", 40, 3},
		{"\x1b[32m" + strings.Repeat("x", 40) + "\x1b[0m\n", 40, 1},
	} {
		if got := screenRows(tc.text, tc.width); got != tc.want {
			t.Errorf("screenRows(%q, %d) = %d, want %d", tc.text, tc.width, got, tc.want)
		}
	}
}

// TestRootCmd_Help: every command says what it does at length, and shows how.
func TestRootCmd_Help(t *testing.T) {
	root := newRootCmd(&bytes.Buffer{}, &bytes.Buffer{})
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" {
			continue
		}
		if c.Long == "" {
			t.Errorf("%s has no long description", c.Name())
		}
		if c.Example == "" {
			t.Errorf("%s has no examples", c.Name())
		}
		if c.Name() != "completion" && !strings.Contains(c.Long, "Exit status") {
			t.Errorf("%s: the help names no exit status", c.Name())
		}
	}
}

// TestStatusView_FollowRejectedPlan: a plan rejected while --follow runs shows in
// the report without any change of the state file.
func TestStatusView_FollowRejectedPlan(t *testing.T) {
	dir := t.TempDir()
	replaceFile(t, filepath.Join(dir, "state.json"), runningState)
	ws, err := store.NewWorkspace(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(ws.PlansDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "plans"), 0o755); err != nil {
		t.Fatal(err)
	}
	var out, logs syncBuffer
	v := followView(t, dir, &out, &logs, false, func() time.Time { return time.Date(2026, 2, 10, 21, 31, 0, 0, time.UTC) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- v.followChanges(ctx, time.Second) }()
	waitFor(t, "the first report", func() bool { return strings.Contains(out.String(), "running 1m0s") })
	replaceFile(t, filepath.Join(dir, "plans", "typo.yaml"), "name: typo\nsteps: []\n")
	if err := ws.WritePlanRecord("typo", core.PlanRecord{File: "plans/typo.yaml", Status: core.PlanInvalid,
		Errors: []string{"plans/typo.yaml:2:8: steps: want a non-empty list"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the rejected plan in a report", func() bool {
		return strings.Contains(out.String(), "  plans/typo.yaml: 1 error\n    plans/typo.yaml:2:8: steps: want a non-empty list\n")
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "rejected plans:"); n != 1 {
		t.Fatalf("the rejected plan was shown %d times, want once: %q", n, out.String())
	}
}

// A notification of a step, not of one of its tries (a loop leaving at that
// step), names no try: "try 0" is none.
func TestWriteNote_NoTryZero(t *testing.T) {
	var b bytes.Buffer
	now := time.Now()
	writeNote(&b, notify.Notice{Time: now, Step: "review", Try: 0, Status: "done", Event: "loop-exit", Output: "rounds: left at review"}, now)
	if strings.Contains(b.String(), "try 0") || !strings.Contains(b.String(), "review  done (loop-exit)") {
		t.Errorf("note: %q", b.String())
	}
}
