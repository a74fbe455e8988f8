package store

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/internal/testfs"
)

// halfWriter writes half of what it is given, then fails as a full disk does.
func halfWriter(f *os.File, b []byte) (int, error) {
	n, _ := f.Write(b[:len(b)/2])
	return n, syscall.ENOSPC
}

// TestLineLog_FailedAppendIsAbsent: a write that fails partway leaves nothing of
// its line; the retried line is whole and on a line of its own.
func TestLineLog_FailedAppendIsAbsent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	l := &LineLog{Path: path}
	defer l.Close()
	if err := l.Append([]byte(`{"n":1}` + "\n")); err != nil {
		t.Fatal(err)
	}
	l.write = halfWriter
	if err := l.Append([]byte(`{"n":2,"pad":"` + strings.Repeat("x", 100) + `"}` + "\n")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: %v, want ENOSPC", err)
	}
	if data, _ := os.ReadFile(path); string(data) != `{"n":1}`+"\n" {
		t.Fatalf("after the failed append the file holds %q, want the first line alone", data)
	}
	l.write = nil
	if err := l.Append([]byte(`{"n":2}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); string(data) != `{"n":1}`+"\n"+`{"n":2}`+"\n" {
		t.Fatalf("after the retry the file holds %q", data)
	}
}

// TestLineLog_TornTailCutOnOpen: a line left torn by a crash is cut when the file
// is opened again, before anything is appended.
func TestLineLog_TornTailCutOnOpen(t *testing.T) {
	for _, tc := range []struct{ before, want string }{
		{`{"n":1}` + "\n" + `{"n":2,"tor`, `{"n":1}` + "\n" + `{"n":3}` + "\n"},
		{`{"n":2,"tor`, `{"n":3}` + "\n"},
		{"", `{"n":3}` + "\n"},
		{strings.Repeat("x", maxTornScan+10), strings.Repeat("x", maxTornScan+10) + "\n" + `{"n":3}` + "\n"},
	} {
		path := filepath.Join(t.TempDir(), "feed.jsonl")
		if err := os.WriteFile(path, []byte(tc.before), 0o644); err != nil {
			t.Fatal(err)
		}
		l := &LineLog{Path: path}
		if err := l.Append([]byte(`{"n":3}` + "\n")); err != nil {
			t.Fatal(err)
		}
		l.Close()
		if data, _ := os.ReadFile(path); string(data) != tc.want {
			t.Errorf("%.20q: file holds %.40q, want %.40q", tc.before, data, tc.want)
		}
	}
}

// TestJournal_FailedRecordIsAbsent: the journal appends through a LineLog.
func TestJournal_FailedRecordIsAbsent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	j := &Journal{Path: path}
	defer j.Close()
	j.lines().write = halfWriter
	if err := j.Record(core.Entry{Event: "decide", Reason: strings.Repeat("r", 200)}); err == nil {
		t.Fatal("a failed record reported no error")
	}
	j.lines().write = nil
	if err := j.Record(core.Entry{Event: "launch"}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n"); len(lines) != 1 || !strings.Contains(lines[0], `"event":"launch"`) {
		t.Errorf("journal holds %q, want the launch alone", data)
	}
}

// TestLineLog_FullDiskMidAppend fills a disk of its own so that a line's first
// bytes fit and the rest do not: the write is cut short by the kernel, and the
// file keeps only whole lines; once there is room, the retried line is whole.
func TestLineLog_FullDiskMidAppend(t *testing.T) {
	dir := tmpfsDir(t, "256k")
	path := filepath.Join(dir, "feed.jsonl")
	l := &LineLog{Path: path}
	defer l.Close()
	// The file ends 100 bytes short of a page: what follows fits that far.
	first := []byte(strings.Repeat("a", 4096-100-1) + "\n")
	if err := l.Append(first); err != nil {
		t.Fatal(err)
	}
	free := testfs.FillDisk(t, dir)
	line := []byte(`{"n":2,"pad":"` + strings.Repeat("x", 400) + `"}` + "\n")
	if err := l.Append(line); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: %v, want ENOSPC", err)
	}
	if data, _ := os.ReadFile(path); string(data) != string(first) {
		t.Fatalf("after the failed append the file is %d bytes, want the %d of the first line", len(data), len(first))
	}
	free()
	if err := l.Append(line); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); string(data) != string(first)+string(line) {
		t.Fatalf("after the retry the file is %d bytes, want both lines whole", len(data))
	}
}
