package mcp

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// stepseqBinary builds the command once for the tests that run it.
func stepseqBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "stepseq-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "stepseq")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/stepseq/stepseq").CombinedOutput()
		if err != nil {
			buildErr = &buildError{out: string(out), err: err}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return "go build: " + e.err.Error() + "\n" + e.out }

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// stdioSession runs `stepseq mcp DIR` and connects to it.
func stdioSession(t *testing.T, dir string) *sdk.ClientSession {
	t.Helper()
	cmd := exec.Command(stepseqBinary(t), "mcp", dir)
	cmd.Stderr = &testLog{t: t}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "go-test", Version: "1"}, nil).
		Connect(context.Background(), &sdk.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			t.Logf("close: %v", err)
		}
	})
	return cs
}

type testLog struct {
	mu sync.Mutex
	t  *testing.T
}

func (l *testLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.t.Logf("stepseq: %s", b)
	return len(b), nil
}

func TestBinary_StdioRunsItsOwnSidecar(t *testing.T) {
	drive(t, stdioSession(t, t.TempDir()))
}

func TestBinary_StdioBesideALiveSidecar(t *testing.T) {
	dir := t.TempDir()
	watch := exec.Command(stepseqBinary(t), "watch", dir)
	watch.Stderr = &testLog{t: t}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = watch.Process.Signal(os.Interrupt)
		_ = watch.Wait()
	})
	deadline := time.Now().Add(effectWait)
	for {
		if data, err := os.ReadFile(filepath.Join(dir, ".stepseq", "journal.jsonl")); err == nil && strings.Contains(string(data), `"event":"ready"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sidecar never got ready")
		}
		time.Sleep(5 * time.Millisecond)
	}
	drive(t, stdioSession(t, dir))
}

func TestHandler_StreamableHTTP(t *testing.T) {
	w := newWorkspace(t)
	srv := httptest.NewServer(Handler(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)}))
	t.Cleanup(srv.Close)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "http-test", Version: "1"}, nil).
		Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	drive(t, cs)
}

// A plan run by stepseq mcp's own sidecar notifies as one run by watch does:
// .stepseq/notifications.jsonl, the plan's notify sinks and the notifications
// tool. Its sidecar had no notifier, and told nobody.
func TestBinary_StdioOwnSidecarNotifies(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plan := "name: told\nnotify:\n  - command: [sh, -c, 'cat >> notes.jsonl && echo >> notes.jsonl']\n" +
		"agent: [\"true\"]\nsteps:\n  - id: one\n    title: One\n    instruction: do one\n"
	if err := os.MkdirAll(filepath.Join(dir, "plans"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plans", "told.yaml"), []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	cs := stdioSession(t, dir)
	if _, errText := call(t, cs, "run_resume", map[string]any{}); errText != "" {
		t.Fatal(errText)
	}
	deadline := time.Now().Add(effectWait)
	var notes string
	for !strings.Contains(notes, "plan_done") {
		if time.Now().After(deadline) {
			t.Fatalf("the notifications tool never told the plan's end; it said %s", notes)
		}
		time.Sleep(5 * time.Millisecond)
		out, _ := call(t, cs, "notifications", map[string]any{})
		notes = fmt.Sprint(out["notifications"])
	}
	if !strings.Contains(notes, "dispatching") {
		t.Errorf("notifications tool: %v", notes)
	}
	if _, err := os.Stat(filepath.Join(dir, ".stepseq", "notifications.jsonl")); err != nil {
		t.Errorf("no notifications.jsonl: %v", err)
	}
	for {
		data, _ := os.ReadFile(filepath.Join(dir, "notes.jsonl"))
		if strings.Contains(string(data), `"event":"plan_done"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the plan's notify command never heard the plan's end; it got:\n%s", data)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
