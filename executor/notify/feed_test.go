package notify

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"
)

func TestRecent(t *testing.T) {
	ws := t.TempDir()
	n, err := New(Config{Dir: ws, Logger: testLogger(t), FeedBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer closeNotifier(t, n)
	if got, err := Recent(ws, 5); err != nil || len(got) != 0 {
		t.Fatalf("empty feed: %v, %v", got, err)
	}
	ids := emitN(t, n, 40, "s")
	eventually(t, "the last report in the feed", func() bool {
		r, _ := Recent(ws, 1)
		return len(r) == 1 && r[0].ID == ids[len(ids)-1]
	})
	meta := filepath.Join(ws, ".stepseq")
	if _, err := os.Stat(filepath.Join(meta, FeedName+".1")); err != nil {
		t.Fatalf("the feed did not rotate: %v", err)
	}
	if info, _ := os.Stat(filepath.Join(meta, FeedName)); info.Size() > 4<<10 {
		t.Errorf("feed is %d bytes, cap %d", info.Size(), 4<<10)
	}
	for _, k := range []int{1, 5, 12} {
		got, err := Recent(meta, k)
		if err != nil {
			t.Fatal(err)
		}
		var gotIDs []string
		for _, r := range got {
			gotIDs = append(gotIDs, r.ID)
		}
		if want := ids[len(ids)-k:]; !slices.Equal(gotIDs, want) {
			t.Errorf("Recent(%d) = %v, want %v", k, gotIDs, want)
		}
	}
	since, err := Since(ws, ids[35], 100)
	if err != nil || len(since) != 4 || since[0].ID != ids[36] || since[3].ID != ids[39] {
		t.Errorf("Since(%s) = %v, %v; want the last four", ids[35], since, err)
	}
	// A repeated delivery shows once.
	f, _ := os.OpenFile(filepath.Join(meta, FeedName), os.O_WRONLY|os.O_APPEND, 0)
	line, _ := os.ReadFile(filepath.Join(meta, FeedName))
	last := strings.SplitAfter(strings.TrimSuffix(string(line), "\n"), "\n")
	f.WriteString(last[len(last)-1] + "\n")
	f.Close()
	got, _ := Recent(ws, 3)
	if len(got) != 3 || got[2].ID != ids[len(ids)-1] || got[1].ID != ids[len(ids)-2] {
		t.Errorf("after a repeat: %v", got)
	}
}

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		in  string
		max int
	}{
		{"short", 10},
		{strings.Repeat("a", 20), 10},
		{strings.Repeat("é", 20), 10},
		{strings.Repeat("日本", 20), 11},
		{strings.Repeat("🙂", 20), 9},
	} {
		got := cut(tc.in, tc.max)
		if len(got) > tc.max || !utf8.ValidString(got) {
			t.Errorf("cut(%q, %d) = %q", tc.in, tc.max, got)
		}
		if len(tc.in) <= tc.max && got != tc.in {
			t.Errorf("cut changed a short string: %q", got)
		}
		if len(tc.in) > tc.max && !strings.HasSuffix(got, "…") {
			t.Errorf("cut(%q) = %q, no mark", tc.in, got)
		}
	}
}

// A FIFO or a symlink where the feed should be is refused, never waited on or
// followed.
func TestRecent_RefusesOddFiles(t *testing.T) {
	for name, create := range map[string]func(path string) error{
		"fifo":    func(p string) error { return syscall.Mkfifo(p, 0o644) },
		"symlink": func(p string) error { return os.Symlink("/etc/passwd", p) },
	} {
		t.Run(name, func(t *testing.T) {
			meta := filepath.Join(t.TempDir(), ".stepseq")
			if err := os.Mkdir(meta, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := create(filepath.Join(meta, FeedName)); err != nil {
				t.Fatal(err)
			}
			if got, err := Recent(meta, 5); err == nil {
				t.Errorf("Recent = %v, want an error", got)
			}
		})
	}
}

// TestRecent_TornAndGluedLines: a feed whose writer failed mid-append before
// appends were cut back (a partial report with its retried copy run on after it)
// and a last line still being written: every whole report is read, none twice.
func TestRecent_TornAndGluedLines(t *testing.T) {
	meta := filepath.Join(t.TempDir(), ".stepseq")
	if err := os.Mkdir(meta, 0o755); err != nil {
		t.Fatal(err)
	}
	r1 := `{"id":"a1","time":"2026-02-10T21:30:00Z","step":"s1","status":"dispatching"}`
	r2 := `{"id":"a2","time":"2026-02-10T21:30:01Z","step":"s1","status":"done"}`
	content := r1 + "\n" + r2[:30] + r2 + "\n" + `{"id":"a3","time":"2026-02`
	if err := os.WriteFile(filepath.Join(meta, FeedName), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Recent(meta, 10)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range got {
		ids = append(ids, r.ID)
	}
	if strings.Join(ids, ",") != "a1,a2" {
		t.Errorf("Recent: %v, want a1,a2", ids)
	}
	var lines []string
	for line := range FeedLines([]byte(content)) {
		rec, ok := FeedRecord(line)
		if ok {
			lines = append(lines, string(rec))
		}
	}
	if strings.Join(lines, "\n") != r1+"\n"+r2 {
		t.Errorf("FeedLines and FeedRecord: %q", lines)
	}
}
