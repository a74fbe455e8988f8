package engine

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/store"
)

// within runs fn and fails the test if it has not returned within five seconds:
// a read that blocks on a FIFO never returns at all.
func within[T any](t *testing.T, what string, fn func() T) T {
	t.Helper()
	got := make(chan T, 1)
	go func() { got <- fn() }()
	select {
	case v := <-got:
		return v
	case <-time.After(effectWait):
		t.Fatalf("%s blocked", what)
		panic("unreachable")
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func openRoot(t *testing.T, dir string) *os.Root {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

// passwdBytes is what a link to /etc/passwd must never leak: its first line.
func passwdBytes(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("/etc/passwd")
	if err != nil || len(data) == 0 {
		t.Fatalf("the test needs /etc/passwd: %v", err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	return line
}

func TestDrainTriggers_NothingBlocks(t *testing.T) {
	ws, err := store.NewWorkspace(filepath.Join(t.TempDir(), "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteTrigger(ws, core.Trigger{Step: "good", From: "trigger"}); err != nil {
		t.Fatal(err)
	}
	td := ws.TriggersDir()
	mkfifo(t, filepath.Join(td, "0-fifo.json"))
	if err := os.Mkdir(filepath.Join(td, "1-dir.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	symlink(t, "/etc/passwd", filepath.Join(td, "2-evil.json"))
	symlink(t, "/dev/zero", filepath.Join(td, "3-zero.json"))
	type result struct {
		ts   []core.Trigger
		errs []error
	}
	r := within(t, "DrainTriggers", func() result {
		ts, errs := DrainTriggers(ws)
		return result{ts, errs}
	})
	if len(r.ts) != 1 || r.ts[0].Step != "good" {
		t.Errorf("triggers = %+v, want the one good trigger", r.ts)
	}
	if len(r.errs) != 3 {
		t.Errorf("errors = %v, want one per FIFO or link", r.errs)
	}
	leak := passwdBytes(t)
	for _, err := range r.errs {
		if strings.Contains(err.Error(), leak) || strings.Contains(err.Error(), "/etc/passwd") {
			t.Errorf("err %q echoes the link's target", err)
		}
	}
	left, _ := os.ReadDir(td)
	if len(left) != 1 || left[0].Name() != "1-dir.json" {
		t.Errorf("left in the triggers folder: %v; want only the directory, skipped", left)
	}
	// A second drain finds nothing and still does not block.
	if ts := within(t, "DrainTriggers again", func() []core.Trigger { ts, _ := DrainTriggers(ws); return ts }); len(ts) != 0 {
		t.Errorf("second drain: %+v", ts)
	}
}

func TestReadPlanFileIn_RefusesLinksOut(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	valid := "steps:\n  - id: x\n    title: X\n    instruction: write:pwned.txt\n"
	if err := os.WriteFile(filepath.Join(outside, "p.yaml"), []byte(valid), 0o644); err != nil {
		t.Fatal(err)
	}
	symlink(t, "/etc/passwd", filepath.Join(dir, "plans", "evil.yaml"))
	symlink(t, filepath.Join(outside, "p.yaml"), filepath.Join(dir, "plans", "out.yaml"))
	mkfifo(t, filepath.Join(dir, "plans", "fifo.yaml"))
	root := openRoot(t, dir)
	leak := passwdBytes(t)
	for _, rel := range []string{"plans/evil.yaml", "plans/out.yaml", "plans/fifo.yaml"} {
		pf := within(t, rel, func() core.PlanFile { return ReadPlanFileIn(root, rel) })
		if pf.Plan != nil || pf.Err == nil || pf.Hash != "" {
			t.Errorf("%s: plan %v, hash %q, err %v; want it refused unread", rel, pf.Plan, pf.Hash, pf.Err)
			continue
		}
		for _, line := range ErrorLines(pf.Err) {
			if strings.Contains(line, leak) || strings.Contains(line, "/etc/passwd") || strings.Contains(line, outside) {
				t.Errorf("%s: error line %q echoes what is outside", rel, line)
			}
		}
	}
}
