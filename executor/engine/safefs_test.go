package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/internal/testfs"
	"github.com/stepseq/stepseq/executor/store"
)

func TestDrainTriggers_NothingBlocks(t *testing.T) {
	ws, err := store.NewWorkspace(filepath.Join(t.TempDir(), "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteTrigger(ws, core.Trigger{Step: "good", From: "trigger"}); err != nil {
		t.Fatal(err)
	}
	td := ws.TriggersDir()
	testfs.Mkfifo(t, filepath.Join(td, "0-fifo.json"))
	if err := os.Mkdir(filepath.Join(td, "1-dir.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	testfs.Symlink(t, "/etc/passwd", filepath.Join(td, "2-evil.json"))
	testfs.Symlink(t, "/dev/zero", filepath.Join(td, "3-zero.json"))
	type result struct {
		ts   []core.Trigger
		errs []error
	}
	r := testfs.Within(t, effectWait, "DrainTriggers", func() result {
		ts, errs := DrainTriggers(ws)
		return result{ts, errs}
	})
	if len(r.ts) != 1 || r.ts[0].Step != "good" {
		t.Errorf("triggers = %+v, want the one good trigger", r.ts)
	}
	if len(r.errs) != 3 {
		t.Errorf("errors = %v, want one per FIFO or link", r.errs)
	}
	leak := testfs.PasswdBytes(t)
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
	if ts := testfs.Within(t, effectWait, "DrainTriggers again", func() []core.Trigger { ts, _ := DrainTriggers(ws); return ts }); len(ts) != 0 {
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
	testfs.Symlink(t, "/etc/passwd", filepath.Join(dir, "plans", "evil.yaml"))
	testfs.Symlink(t, filepath.Join(outside, "p.yaml"), filepath.Join(dir, "plans", "out.yaml"))
	testfs.Mkfifo(t, filepath.Join(dir, "plans", "fifo.yaml"))
	root := testfs.OpenRoot(t, dir)
	leak := testfs.PasswdBytes(t)
	for _, rel := range []string{"plans/evil.yaml", "plans/out.yaml", "plans/fifo.yaml"} {
		pf := testfs.Within(t, effectWait, rel, func() core.PlanFile { return ReadPlanFileIn(root, rel) })
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
