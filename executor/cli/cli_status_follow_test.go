package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// blockedBuild is a plan whose one step is out of retries: blocked.
const blockedBuild = `{"plan": {"steps": {"build": {"title": "Build", "instruction": "x"}}},
	"stepQueue": ["build"], "currentStep": 0, "stepDelayMinutes": 0, "artifacts": [],
	"stepRuns": {"build": {"status": "FAILED", "tries": 3, "error": "compile error"}},
	"blockers": ["build: max retries (3) exceeded"], "status": "IN_PROGRESS"}`

// following is one status --follow run in process: its reports and its end.
type following struct {
	reports reportWriter
	end     chan error
}

// follow starts status --follow on dir until ctx ends.
func follow(ctx context.Context, dir string) *following {
	f := &following{reports: make(reportWriter, 64), end: make(chan error, 1)}
	go func() { f.end <- run(ctx, []string{"status", "--follow", dir}, f.reports, io.Discard) }()
	return f
}

// next waits for the report that holds want, passing over the others; the
// follow ending first fails the test at once.
func (f *following) next(t *testing.T, want string) string {
	t.Helper()
	for {
		select {
		case r := <-f.reports:
			if strings.Contains(r, want) {
				return r
			}
		case err := <-f.end:
			t.Fatalf("status --follow ended (%v) before a report with %q", err, want)
		case <-time.After(effectWait): // a failsafe, not a synchronisation
			t.Fatalf("no report with %q from status --follow", want)
		}
	}
}

// ended waits for the follow's end and returns its error.
func (f *following) ended(t *testing.T) error {
	t.Helper()
	select {
	case err := <-f.end:
		return err
	case <-time.After(effectWait):
		t.Fatal("status --follow did not end")
		return nil
	}
}

// TestStatusFollow_Blocked: --follow does not end on a blocked plan, which a
// retry may move: it shows the retried step running, then exits 0 on DONE; an
// interrupt while the plan is blocked exits 1, as status does on it.
func TestStatusFollow_Blocked(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	replaceFile(t, state, blockedBuild)
	f := follow(t.Context(), dir)
	f.next(t, "max retries (3) exceeded")

	retried := strings.NewReplacer(`"status": "FAILED", "tries": 3, "error": "compile error"`, `"status": "IN_PROGRESS", "tries": 4`,
		`"build: max retries (3) exceeded"`, ``).Replace(blockedBuild)
	replaceFile(t, state, retried)
	f.next(t, "now: build: ")
	done := strings.NewReplacer(`"status": "IN_PROGRESS", "tries": 4`, `"status": "DONE", "tries": 4`,
		`"currentStep": 0`, `"currentStep": 1`, `"status": "IN_PROGRESS"}`, `"status": "DONE"}`).Replace(retried)
	replaceFile(t, state, done)
	f.next(t, "now: plan DONE")
	if err := f.ended(t); err != nil {
		t.Fatalf("status --follow on DONE: %v, want exit 0", err)
	}

	// Interrupted while blocked: exit 1.
	replaceFile(t, state, blockedBuild)
	ctx, cancel := context.WithCancel(t.Context())
	f = follow(ctx, dir)
	f.next(t, "max retries (3) exceeded")
	cancel()
	var ee *exitError
	if err := f.ended(t); !errors.As(err, &ee) || ee.code != 1 {
		t.Errorf("status --follow interrupted while blocked: %v, want exit 1", err)
	}
}

// TestStatusFollow_SeesARetry: with a real sidecar, status --follow started on
// a blocked run keeps following; stepseq retry, from another process, sets
// the step going again, and the report shows it running before it is DONE.
func TestStatusFollow_SeesARetry(t *testing.T) {
	stepseq, _ := builtBinaries(t)
	agent := filepath.Join(filepath.Dir(stepseq), "fakeagent")
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "plans"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The first try fails; the retry waits for release, so that it is seen
	// running, then writes out.txt.
	plan := "steps:\n  - id: build\n    title: Build\n    instruction: failfirst:.first waitfor:release write:out.txt\n    requiredOutputs: [out.txt]\n"
	if err := os.WriteFile(filepath.Join(dir, "plans", "p.yaml"), []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	watch := exec.Command(stepseq, "watch", dir)
	watch.Env = append(os.Environ(), "STEP_AGENT_CMD="+agent, "STEP_MAX_RETRIES=1")
	var logs syncBuffer
	watch.Stderr = &logs
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = watch.Process.Signal(syscall.SIGTERM)
		_ = watch.Wait()
		if t.Failed() {
			t.Logf("watch:\n%s", logs.String())
		}
	})

	f := follow(t.Context(), dir)
	f.next(t, "build: max retries (1) exceeded")

	var out bytes.Buffer
	retry := exec.Command(stepseq, "retry", "build", dir)
	retry.Stdout, retry.Stderr = &out, &out
	if err := retry.Run(); err != nil {
		t.Fatalf("stepseq retry: %v\n%s", err, out.String())
	}
	f.next(t, "now: build: running (try 2)")
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f.next(t, "now: plan DONE")
	if err := f.ended(t); err != nil {
		t.Fatalf("status --follow: %v, want exit 0 once DONE", err)
	}
}
