package store

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/internal/testfs"
)

func TestPrune(t *testing.T) {
	dir := t.TempDir()
	ws, err := NewWorkspace(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	put := func(rel, content string, age time.Duration) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	done := `{"plan":{"steps":{}},"stepQueue":[],"currentStep":0,"stepRuns":{},"status":"DONE"}`
	held := `{"plan":{"steps":{}},"stepQueue":[],"currentStep":0,"stepRuns":{},"status":"IN_PROGRESS"}`
	put(".stepseq/history/old-done.json", done, 31*day)
	put(".stepseq/history/new-done.json", done, 29*day)
	put(".stepseq/history/old-held.json", held, 31*day)
	put(".stepseq/history/ancient-held.json", held, 91*day)
	put("state.json", `{"plan":{"steps":{"a":{"title":"A","instruction":"a"},"b":{"title":"B","instruction":"b"},"c":{"title":"C","instruction":"c"}}},
		"stepQueue":["a","b","c"],"currentStep":2,
		"stepRuns":{"a":{"status":"DONE","tries":1},"b":{"status":"FAILED","tries":2},"c":{"status":"IN_PROGRESS","tries":1}},"status":"IN_PROGRESS"}`, 0)
	put(".stepseq/logs/a/1.log", "x", 31*day)
	put(".stepseq/logs/b/1.log", "x", 31*day)
	put(".stepseq/logs/b/2.log", "x", 91*day)
	put(".stepseq/logs/c/1.log", "x", 400*day)
	put(".stepseq/logs/gone/1.log", "x", 91*day)
	put(".stepseq/journal.jsonl.1", "{}", 91*day)
	put(".stepseq/journal.jsonl", "{}", 400*day)

	got, err := Prune(ws, now, DefaultRetention)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got.Removed)
	want := []string{
		".stepseq/history/ancient-held.json",
		".stepseq/history/old-done.json",
		".stepseq/journal.jsonl.1",
		".stepseq/logs/a/1.log",
		".stepseq/logs/b/2.log",
		".stepseq/logs/gone/1.log",
	}
	if !slices.Equal(got.Removed, want) {
		t.Errorf("removed %q\nwant %q", got.Removed, want)
	}
	for _, kept := range []string{".stepseq/history/new-done.json", ".stepseq/history/old-held.json", ".stepseq/logs/b/1.log", ".stepseq/logs/c/1.log", ".stepseq/journal.jsonl"} {
		if _, err := os.Stat(filepath.Join(dir, kept)); err != nil {
			t.Errorf("%s: %v", kept, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".stepseq/logs/gone")); !os.IsNotExist(err) {
		t.Errorf("empty log folder kept: %v", err)
	}
}

func TestParseRetention(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want RetentionPolicy
		bad  bool
	}{
		{"", DefaultRetention, false},
		{"finished=7d", RetentionPolicy{Finished: 7 * 24 * time.Hour, Failed: DefaultRetention.Failed}, false},
		{"finished=1h,failed=0", RetentionPolicy{Finished: time.Hour}, false},
		{"finished=soon", RetentionPolicy{}, true},
		{"done=1d", RetentionPolicy{}, true},
		{"finished=106751d", RetentionPolicy{Finished: 106751 * 24 * time.Hour, Failed: DefaultRetention.Failed}, false},
		{"finished=106752d", RetentionPolicy{}, true}, // past what time.Duration holds
		{"finished=9999999999999d", RetentionPolicy{}, true},
	} {
		got, err := ParseRetention(tc.in)
		if (err != nil) != tc.bad || !tc.bad && got != tc.want {
			t.Errorf("ParseRetention(%q) = %v, %v", tc.in, got, err)
		}
	}
}

// TestPrune_Runs: closed and finished runs go whole once their retention has
// passed; an open run keeps its state, and its logs are pruned as state.json's.
func TestPrune_Runs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ws, err := NewWorkspace(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	put := func(rel, content string, age time.Duration) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	done := `{"plan":{"steps":{}},"stepQueue":[],"currentStep":0,"stepRuns":{},"status":"DONE"}`
	open := `{"plan":{"steps":{"a":{"title":"A","instruction":"a"}}},"stepQueue":["a"],"currentStep":0,"stepRuns":{"a":{"status":"FAILED","tries":1,"error":""}},"status":"IN_PROGRESS"}`
	put("state.old-done.json", done, 31*day)
	put(".stepseq/runs/old-done/logs/a/1.log", "x", 31*day)
	put("state.new-done.json", done, 29*day)
	put("state.open.json", open, 400*day)
	put(".stepseq/runs/open/logs/a/1.log", "x", 91*day)
	put(".stepseq/runs/old-closed/closed.json", open, 91*day)
	put(".stepseq/runs/new-closed/closed.json", open, 89*day)
	put(".stepseq/runs/done-closed/closed.json", done, 31*day)

	got, err := Prune(ws, now, DefaultRetention)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got.Removed)
	want := []string{
		".stepseq/runs/done-closed",
		".stepseq/runs/old-closed",
		".stepseq/runs/old-done",
		".stepseq/runs/open/logs/a/1.log",
	}
	if !slices.Equal(got.Removed, want) {
		t.Errorf("removed %q\nwant %q", got.Removed, want)
	}
	for _, gone := range []string{"state.old-done.json", ".stepseq/runs/old-done", ".stepseq/runs/old-closed"} {
		if _, err := os.Stat(filepath.Join(dir, gone)); !os.IsNotExist(err) {
			t.Errorf("%s kept: %v", gone, err)
		}
	}
	for _, kept := range []string{"state.new-done.json", "state.open.json", ".stepseq/runs/new-closed/closed.json"} {
		if _, err := os.Stat(filepath.Join(dir, kept)); err != nil {
			t.Errorf("%s: %v", kept, err)
		}
	}
	runs, _ := ListRuns(ws)
	var names []string
	for _, r := range runs {
		names = append(names, r.Name+"="+r.Status)
	}
	if w := []string{"new-done=done", "open=active", "new-closed=closed"}; !slices.Equal(names, w) {
		t.Errorf("runs after pruning %v, want %v", names, w)
	}
}

// An archive old enough to judge that is a FIFO, or over the state cap, is
// kept the longer time without being read: a FIFO would block retention for
// good, and a huge file be read whole only to be refused.
func TestPrune_ArchivesReadSafely(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ws, err := NewWorkspace(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	old := now.Add(-31 * 24 * time.Hour) // past the finished runs' retention, not the failed ones'
	fifo := filepath.Join(dir, ".stepseq/runs/piped/closed.json")
	testfs.Mkfifo(t, fifo)
	huge := filepath.Join(dir, ".stepseq/runs/huge/closed.json")
	if err := os.MkdirAll(filepath.Dir(huge), 0o755); err != nil {
		t.Fatal(err)
	}
	done := `{"plan":{"steps":{}},"stepQueue":[],"currentStep":0,"stepRuns":{},"status":"DONE"}`
	if err := os.WriteFile(huge, []byte(done+strings.Repeat(" ", int(StateCap.Bytes))), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, huge} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	got := testfs.Within(t, 10*time.Second, "Prune", func() Pruned {
		got, _ := Prune(ws, now, DefaultRetention)
		return got
	})
	if len(got.Removed) > 0 {
		t.Errorf("removed %q: an archive that does not read is kept the longer time", got.Removed)
	}
}
