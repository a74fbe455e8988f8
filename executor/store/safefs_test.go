package store

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/executor/internal/testfs"
)

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
	testfs.Mkfifo(t, filepath.Join(dir, "plans", "fifo.yaml"))
	testfs.Symlink(t, "fifo.yaml", filepath.Join(dir, "plans", "to-fifo.yaml"))
	testfs.Symlink(t, "ok.yaml", filepath.Join(dir, "plans", "inside.yaml"))
	testfs.Symlink(t, "/etc/passwd", filepath.Join(dir, "plans", "evil.yaml"))
	testfs.Symlink(t, filepath.Join(outside, "p.yaml"), filepath.Join(dir, "plans", "out.yaml"))
	testfs.Symlink(t, "/dev/zero", filepath.Join(dir, "plans", "zero.yaml"))
	big, err := os.Create(filepath.Join(dir, "plans", "big.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(60 << 20); err != nil { // sparse: 60 MiB, no disk
		t.Fatal(err)
	}
	big.Close()
	root := testfs.OpenRoot(t, dir)
	leak := testfs.PasswdBytes(t)

	tests := []struct {
		rel  string
		want error
		msg  string
	}{
		{"plans/ok.yaml", nil, ""},
		{"plans/inside.yaml", nil, ""},
		{"plans/fifo.yaml", ErrNotRegular, "plans/fifo.yaml: not a regular file (a FIFO)"},
		{"plans/to-fifo.yaml", ErrNotRegular, "(a FIFO)"},
		{"plans/sub", ErrNotRegular, "(a directory)"},
		{"plans/evil.yaml", ErrOutsideWorkspace, "plans/evil.yaml: a path out of the workspace: refused"},
		{"plans/out.yaml", ErrOutsideWorkspace, "refused"},
		{"plans/zero.yaml", ErrOutsideWorkspace, "refused"},
		{"../" + filepath.Base(outside) + "/p.yaml", ErrOutsideWorkspace, "refused"},
		{"plans/big.yaml", ErrOverCap, "plans/big.yaml: 60 MiB is over the 8 MiB cap for a plan: a plan is a few kilobytes"},
		{"plans/none.yaml", fs.ErrNotExist, ""},
	}
	for _, tt := range tests {
		t.Run(tt.rel, func(t *testing.T) {
			type result struct {
				data []byte
				err  error
			}
			r := testfs.Within(t, effectWait, "ReadFileIn "+tt.rel, func() result {
				data, err := ReadFileIn(root, tt.rel, PlanCap)
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
	if err := os.WriteFile(path, bytes.Repeat([]byte("x"), int(StateCap.Bytes)), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := ReadFile(path, StateCap); err != nil || int64(len(data)) != StateCap.Bytes {
		t.Fatalf("a file at the cap: %d bytes, %v; want it read", len(data), err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("x"))
	f.Close()
	_, err = ReadFile(path, StateCap)
	var ce *CapError
	if !errors.As(err, &ce) || ce.Size != StateCap.Bytes+1 {
		t.Fatalf("err = %v, want a CapError at one byte over", err)
	}
	if want := path + ": 67108865 bytes is over the 64 MiB cap for a state file"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("err = %q, want %q", err, want)
	}
}

func TestStateFile_ReadRefusesWhatIsNotAFile(t *testing.T) {
	for name, create := range map[string]func(t *testing.T, path string){
		"a FIFO":      testfs.Mkfifo,
		"a directory": func(t *testing.T, path string) { _ = os.Mkdir(path, 0o755) },
		"a device":    func(t *testing.T, path string) { testfs.Symlink(t, "/dev/zero", path) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			sf := &StateFile{Path: filepath.Join(dir, "state.json")}
			create(t, sf.Path)
			err := testfs.Within(t, effectWait, "StateFile.Read", func() error { _, err := sf.Read(); return err })
			named := strings.Contains(err.Error(), name) || name == "a directory" && strings.Contains(err.Error(), "is a folder, not a state file")
			if !errors.Is(err, ErrNotRegular) || !named {
				t.Errorf("err = %v, want ErrNotRegular naming %s", err, name)
			}
			err = testfs.Within(t, effectWait, "StateFile.ReadIfChanged", func() error { _, _, err := sf.ReadIfChanged(); return err })
			if !errors.Is(err, ErrNotRegular) {
				t.Errorf("ReadIfChanged: err = %v, want ErrNotRegular", err)
			}
		})
	}
}
