package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/internal/testfs"
)

var logT0 = time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)

func testHeader() TryHeader {
	return TryHeader{Step: "build", Try: 2, Argv: []string{"claude", "-p", "Build it, don't ask"}, Started: logT0}
}

func readLog(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestTryLog_SilentTryLeavesNoLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logs", "build", "2.log")
	l := OpenTryLog(path, testHeader(), 0)
	if err := l.Finish(core.Exit{Code: 0, Started: logT0, Ended: logT0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a silent try left a log: %v", err)
	}
}

func TestTryLog_HeaderOutputFooter(t *testing.T) {
	tests := []struct {
		name   string
		output []string
		exit   core.Exit
		want   string
	}{
		{"exit 0", []string{"hello\n", "world\n"}, core.Exit{Code: 0, Started: logT0, Ended: logT0.Add(1500 * time.Millisecond)},
			"hello\nworld\n=== stepseq: exit 0 after 1.5s\n"},
		{"no newline at the end", []string{"half a line"}, core.Exit{Code: 3, Started: logT0, Ended: logT0.Add(time.Second)},
			"half a line\n=== stepseq: exit 3 after 1s\n"},
		{"killed", []string{"working\n"}, core.Exit{Code: -1, Signal: syscall.SIGKILL, TimedOut: true, Started: logT0, Ended: logT0.Add(time.Hour)},
			"working\n=== stepseq: killed by SIGKILL, timed out after 1h0m0s\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "logs", "build", "2.log")
			l := OpenTryLog(path, testHeader(), 0)
			for _, s := range tt.output {
				if n, err := l.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if err := l.Finish(tt.exit); err != nil {
				t.Fatal(err)
			}
			head := "=== stepseq: step build, try 2, started 2026-11-30T14:00:00Z\n=== agent: claude -p 'Build it, don'\\''t ask'\n"
			if got := readLog(t, path); got != head+tt.want {
				t.Errorf("log =\n%s\nwant\n%s", got, head+tt.want)
			}
		})
	}
}

// TestTryLog_Cap writes ten times the cap in uneven pieces: the log keeps the
// first and the last bytes exactly, with one marker line between.
func TestTryLog_Cap(t *testing.T) {
	const maxBytes = 1000
	var out bytes.Buffer
	for i := 0; out.Len() < 10*maxBytes; i++ {
		fmt.Fprintf(&out, "line %d\n", i)
	}
	all := out.Bytes()
	path := filepath.Join(t.TempDir(), "1.log")
	l := OpenTryLog(path, TryHeader{Step: "s", Try: 1, Argv: []string{"a"}, Started: logT0}, maxBytes)
	for rest, size := all, 1; len(rest) > 0; size = size*3%700 + 1 {
		k := min(size, len(rest))
		l.Write(rest[:k])
		rest = rest[k:]
	}
	if err := l.Finish(core.Exit{Started: logT0, Ended: logT0}); err != nil {
		t.Fatal(err)
	}
	got := readLog(t, path)
	_, body, _ := strings.Cut(got, "=== agent: a\n")
	headPart, tailPart := string(all[:maxBytes/2]), string(all[len(all)-maxBytes/2:])
	marker := fmt.Sprintf("=== stepseq: %d bytes of output cut here: the log keeps the first 500 bytes and the last 500 bytes\n", len(all)-maxBytes)
	sep := "\n" // the head ends mid-line
	if strings.HasSuffix(headPart, "\n") {
		sep = ""
	}
	want := headPart + sep + marker + tailPart + "=== stepseq: exit 0 after 0s\n"
	if body != want {
		t.Errorf("log body =\n%s\nwant\n%s", body, want)
	}
}

var logMarker = regexp.MustCompile(`\n?=== stepseq: (\d+) bytes of output cut here[^\n]*\n`)

// TestTryLog_TailRing checks the ring on its own edges: output that ends right
// at the head, one byte more, and one write far over the tail.
func TestTryLog_TailRing(t *testing.T) {
	for _, tt := range []struct {
		name   string
		writes []string
		kept   string
		cut    int
	}{
		{"exactly the head", []string{"abcde"}, "abcde", 0},
		{"head and part of the tail", []string{"abcdefg"}, "abcdefg", 0},
		{"head and the whole tail", []string{"abcde", "fghij"}, "abcdefghij", 0},
		{"one over", []string{"abcdefghijk"}, "abcdeghijk", 1},
		{"a huge write", []string{"abcde", strings.Repeat("x", 100) + "VWXYZ"}, "abcdeVWXYZ", 100},
		{"many small writes", strings.Split("abcdefghijklmnopqrstuvwxyz", ""), "abcdevwxyz", 16},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "1.log")
			l := OpenTryLog(path, TryHeader{Step: "s", Try: 1, Argv: []string{"a"}, Started: logT0}, 10)
			for _, w := range tt.writes {
				l.Write([]byte(w))
			}
			if err := l.Finish(core.Exit{Started: logT0, Ended: logT0}); err != nil {
				t.Fatal(err)
			}
			got := readLog(t, path)
			_, body, _ := strings.Cut(got, "=== agent: a\n")
			body, _, _ = strings.Cut(body, "=== stepseq: exit 0")
			body = strings.TrimSuffix(body, "\n")
			cut := "0"
			if m := logMarker.FindStringSubmatchIndex(body); m != nil {
				cut = body[m[2]:m[3]]
				body = body[:m[0]] + body[m[1]:]
			}
			if body != tt.kept || cut != fmt.Sprint(tt.cut) {
				t.Errorf("kept %q, cut %s; want %q, %d; log:\n%s", body, cut, tt.kept, tt.cut, got)
			}
		})
	}
}

func TestTryLog_ReRunAppendsUnderANewHeader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "1.log")
	for i, out := range []string{"first run\n", "second run\n"} {
		l := OpenTryLog(path, TryHeader{Step: "s", Try: 1, Argv: []string{"a"}, Started: logT0.Add(time.Duration(i) * time.Minute)}, 0)
		l.Write([]byte(out))
		if err := l.Finish(core.Exit{Started: logT0, Ended: logT0}); err != nil {
			t.Fatal(err)
		}
	}
	want := "=== stepseq: step s, try 1, started 2026-11-30T14:00:00Z\n=== agent: a\nfirst run\n=== stepseq: exit 0 after 0s\n" +
		"\n=== stepseq: step s, try 1, started 2026-11-30T14:01:00Z\n=== agent: a\nsecond run\n=== stepseq: exit 0 after 0s\n"
	if got := readLog(t, path); got != want {
		t.Errorf("log =\n%s\nwant\n%s", got, want)
	}
}

// TestTryLog_NeverBlocksNorFollows puts a FIFO and a symbolic link where the log
// goes: writing returns at once, the error is kept for Finish, and the link's
// target is untouched.
func TestTryLog_NeverBlocksNorFollows(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.log")
	testfs.Mkfifo(t, fifo)
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.log")
	testfs.Symlink(t, target, link)
	for _, path := range []string{fifo, link} {
		l := OpenTryLog(path, testHeader(), 0)
		testfs.Within(t, effectWait, "Write to "+filepath.Base(path), func() error { _, err := l.Write([]byte("output\n")); return err })
		if err := l.Finish(core.Exit{}); err == nil {
			t.Errorf("%s: Finish reported no error", filepath.Base(path))
		}
	}
	if got := readLog(t, target); got != "keep" {
		t.Errorf("the link's target was written: %q", got)
	}
}

// fullDisk mounts a 256 KiB tmpfs at dir and fills it.
func fullDisk(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := testfs.MountTmpfs(t, dir, "size=256k"); err != nil {
		t.Skipf("a full disk needs a tmpfs, and mounting one needs root (CAP_SYS_ADMIN): %v", err)
	}
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

func TestTryLog_FullDisk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	fullDisk(t, dir)
	l := OpenTryLog(filepath.Join(dir, "1.log"), testHeader(), 0)
	for range 100 {
		if n, err := l.Write([]byte("output that has nowhere to go\n")); n != 30 || err != nil {
			t.Fatalf("Write = %d, %v; the agent must never see the log's trouble", n, err)
		}
	}
	err := l.Finish(core.Exit{})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Finish = %v, want no space left on device", err)
	}
	if err := l.Finish(core.Exit{}); err != nil {
		t.Errorf("second Finish = %v: an error is reported once", err)
	}
}
