package engine

import (
	"bytes"
	"errors"
	"io/fs"
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

func TestReadFileIn(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "p.yaml"), []byte("steps: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "plans", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plans", "ok.yaml"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	mkfifo(t, filepath.Join(dir, "plans", "fifo.yaml"))
	symlink(t, "fifo.yaml", filepath.Join(dir, "plans", "to-fifo.yaml"))
	symlink(t, "ok.yaml", filepath.Join(dir, "plans", "inside.yaml"))
	symlink(t, "/etc/passwd", filepath.Join(dir, "plans", "evil.yaml"))
	symlink(t, filepath.Join(outside, "p.yaml"), filepath.Join(dir, "plans", "out.yaml"))
	symlink(t, "/dev/zero", filepath.Join(dir, "plans", "zero.yaml"))
	big, err := os.Create(filepath.Join(dir, "plans", "big.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(60 << 20); err != nil { // sparse: 60 MiB, no disk
		t.Fatal(err)
	}
	big.Close()
	root := openRoot(t, dir)
	leak := passwdBytes(t)

	tests := []struct {
		rel  string
		want error
		msg  string
	}{
		{"plans/ok.yaml", nil, ""},
		{"plans/inside.yaml", nil, ""},
		{"plans/fifo.yaml", store.ErrNotRegular, "plans/fifo.yaml: not a regular file (a FIFO)"},
		{"plans/to-fifo.yaml", store.ErrNotRegular, "(a FIFO)"},
		{"plans/sub", store.ErrNotRegular, "(a directory)"},
		{"plans/evil.yaml", store.ErrOutsideWorkspace, "plans/evil.yaml: a path out of the workspace: refused"},
		{"plans/out.yaml", store.ErrOutsideWorkspace, "refused"},
		{"plans/zero.yaml", store.ErrOutsideWorkspace, "refused"},
		{"../" + filepath.Base(outside) + "/p.yaml", store.ErrOutsideWorkspace, "refused"},
		{"plans/big.yaml", store.ErrOverCap, "plans/big.yaml: 60 MiB is over the 8 MiB cap for a plan: a plan is a few kilobytes"},
		{"plans/none.yaml", fs.ErrNotExist, ""},
	}
	for _, tt := range tests {
		t.Run(tt.rel, func(t *testing.T) {
			type result struct {
				data []byte
				err  error
			}
			r := within(t, "ReadFileIn "+tt.rel, func() result {
				data, err := store.ReadFileIn(root, tt.rel, store.PlanCap)
				return result{data, err}
			})
			if !errors.Is(r.err, tt.want) || (tt.want == nil) != (r.err == nil) {
				t.Fatalf("err = %v, want %v", r.err, tt.want)
			}
			if tt.want == nil && string(r.data) != "hello" {
				t.Errorf("data = %q", r.data)
			}
			if r.err != nil && !strings.Contains(r.err.Error(), tt.msg) {
				t.Errorf("err = %q, want it to hold %q", r.err, tt.msg)
			}
			for _, secret := range []string{leak, "/etc/passwd", "/dev/zero", outside} {
				if r.err != nil && strings.Contains(r.err.Error(), secret) {
					t.Errorf("err %q echoes %q, outside the workspace", r.err, secret)
				}
			}
		})
	}
}

// TestReadFile_Caps shows a huge state file refused from its size alone: the
// bytes read stay far below the file, whatever its size.
func TestReadFile_Caps(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := os.WriteFile(path, bytes.Repeat([]byte("x"), int(store.StateCap.Bytes)), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := store.ReadFile(path, store.StateCap); err != nil || int64(len(data)) != store.StateCap.Bytes {
		t.Fatalf("a file at the cap: %d bytes, %v; want it read", len(data), err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("x"))
	f.Close()
	_, err = store.ReadFile(path, store.StateCap)
	var ce *store.CapError
	if !errors.As(err, &ce) || ce.Size != store.StateCap.Bytes+1 {
		t.Fatalf("err = %v, want a CapError at one byte over", err)
	}
	if want := path + ": 67108865 bytes is over the 64 MiB cap for a state file"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("err = %q, want %q", err, want)
	}
}

func TestStateFile_ReadRefusesWhatIsNotAFile(t *testing.T) {
	for name, create := range map[string]func(t *testing.T, path string){
		"a FIFO":      mkfifo,
		"a directory": func(t *testing.T, path string) { _ = os.Mkdir(path, 0o755) },
		"a device":    func(t *testing.T, path string) { symlink(t, "/dev/zero", path) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			sf := &store.StateFile{Path: filepath.Join(dir, "state.json")}
			create(t, sf.Path)
			err := within(t, "StateFile.Read", func() error { _, err := sf.Read(); return err })
			named := strings.Contains(err.Error(), name) || name == "a directory" && strings.Contains(err.Error(), "is a folder, not a state file")
			if !errors.Is(err, store.ErrNotRegular) || !named {
				t.Errorf("err = %v, want ErrNotRegular naming %s", err, name)
			}
			err = within(t, "StateFile.ReadIfChanged", func() error { _, _, err := sf.ReadIfChanged(); return err })
			if !errors.Is(err, store.ErrNotRegular) {
				t.Errorf("ReadIfChanged: err = %v, want ErrNotRegular", err)
			}
		})
	}
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
