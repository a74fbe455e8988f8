package engine

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
	"github.com/stepseq/stepseq/executor/internal/testfs"
	"github.com/stepseq/stepseq/planspec"
)

// syncBuffer is a log sink the sidecar's goroutines share with the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestSidecar_HostileWorkspaceFiles drops a FIFO plan, a link to /etc/passwd, a
// link to a valid plan outside the workspace and a FIFO trigger beside a good
// plan: the sidecar runs the good plan, refuses the rest, and no byte from
// outside reaches a plan record, the journal or the log.
func TestSidecar_HostileWorkspaceFiles(t *testing.T) {
	w := newTestWS(t, "")
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "p.yaml"), []byte("steps:\n  - id: x\n    title: X\n    instruction: write:pwned.txt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testfs.Mkfifo(t, w.path("plans/a.yaml"))
	testfs.Symlink(t, "/etc/passwd", w.path("plans/evil.yaml"))
	testfs.Symlink(t, filepath.Join(outside, "p.yaml"), w.path("plans/out.yaml"))
	testfs.Mkfifo(t, w.path(".stepseq/triggers/0-fifo.json"))

	var logs syncBuffer
	c := w.chain()
	c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sc, err := NewSidecar(c.Runtime, SidecarOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- sc.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case <-stopped:
		case <-time.After(effectWait):
			t.Fatal("the sidecar did not stop: its loop is blocked")
		}
	}()
	w.writeFile("plans/z.yaml", "steps:\n  - id: one\n    title: One\n    instruction: write:one.txt\n    requiredOutputs: [one.txt]\n")
	st := w.waitState("z DONE", func(st *planspec.State) bool { return st.Settings.Name == "z" && done(st) })
	if st.Run("one").Tries != 1 {
		t.Errorf("tries = %d", st.Run("one").Tries)
	}
	if w.exists("pwned.txt") {
		t.Error("a plan linked from outside the workspace was run")
	}
	for _, name := range []string{"a", "evil", "out"} {
		var rec core.PlanRecord
		waitFor(t, func() bool {
			var ok bool
			rec, ok = c.WS.ReadPlanRecord(name)
			return ok
		})
		if rec.Status != core.PlanInvalid || rec.Hash != "" {
			t.Errorf("plans/%s.yaml record = %+v, want invalid and unread", name, rec)
		}
	}
	if w.exists(".stepseq/triggers/0-fifo.json") {
		t.Error("the FIFO trigger is still queued")
	}
	leak := testfs.PasswdBytes(t)
	records, _ := filepath.Glob(w.path(".stepseq/plans/*.json"))
	files := append(records, w.path(".stepseq/journal.jsonl"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		if strings.Contains(string(data), leak) || strings.Contains(string(data), "/etc/passwd") || strings.Contains(string(data), outside) {
			t.Errorf("%s echoes what is outside the workspace:\n%s", f, data)
		}
	}
	if s := logs.String(); strings.Contains(s, leak) || strings.Contains(s, "/etc/passwd") || strings.Contains(s, outside) {
		t.Errorf("the log echoes what is outside the workspace:\n%s", s)
	}
}
