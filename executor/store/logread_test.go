package store

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestWorkspace_ReadLog: a try's log read from an offset or as its tail, read
// again from its start once it shrank, and refused unread when it is a FIFO (a
// reader that opened it would block) or a link out of the workspace.
func TestWorkspace_ReadLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ws, err := NewWorkspace(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(try int, content string) {
		t.Helper()
		p := ws.LogPath("s", try)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(1, "0123456789")
	cases := []struct {
		name       string
		from, most int64
		data       string
		start      int64
	}{
		{"whole", 0, 100, "0123456789", 0},
		{"from an offset", 4, 100, "456789", 4},
		{"its tail", 0, 3, "789", 7},
		{"past its end: cut or rewritten", 20, 100, "0123456789", 0},
	}
	for _, c := range cases {
		p, err := ws.ReadLog(nil, "s", 1, c.from, c.most)
		if err != nil || string(p.Data) != c.data || p.Start != c.start || p.Size != 10 {
			t.Errorf("%s: %q start %d size %d, %v; want %q start %d", c.name, p.Data, p.Start, p.Size, err, c.data, c.start)
		}
	}
	if _, err := ws.ReadLog(nil, "s", 9, 0, 100); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no log: %v, want fs.ErrNotExist", err)
	}

	fifo := ws.LogPath("s", 2)
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.ReadLog(nil, "s", 2, 0, 100); !errors.Is(err, ErrNotRegular) {
		t.Errorf("a FIFO: %v, want ErrNotRegular", err)
	}

	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, ws.LogPath("s", 3)); err != nil {
		t.Fatal(err)
	}
	p, err := ws.ReadLog(nil, "s", 3, 0, 100)
	if !errors.Is(err, ErrOutsideWorkspace) || len(p.Data) > 0 || strings.Contains(err.Error(), secret) {
		t.Errorf("a link out: %q, %v; want ErrOutsideWorkspace, the target not named", p.Data, err)
	}
}
