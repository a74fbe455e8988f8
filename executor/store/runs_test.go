package store

import (
	"errors"
	"strings"
	"testing"
)

func TestValidRunName(t *testing.T) {
	for _, tc := range []struct {
		name, why string
	}{
		{"review", ""}, {"a_b-3", ""}, {"main", ""}, {strings.Repeat("x", 64), ""},
		{"", "empty"}, {".x", "starts with a dot"}, {"-x", "starts with a dash"},
		{"a.b", "'.' is not allowed"}, {"a/b", `'/' is not allowed`}, {"é", "not allowed"},
		{strings.Repeat("x", 65), "longer than 64"},
	} {
		err := ValidRunName(tc.name)
		switch {
		case tc.why == "" && err != nil:
			t.Errorf("%q: %v", tc.name, err)
		case tc.why != "" && (err == nil || !errors.Is(err, ErrRunName) || !strings.Contains(err.Error(), strings.Trim(tc.why, `"`))):
			t.Errorf("%q: got %v, want ErrRunName saying %s", tc.name, err, tc.why)
		}
	}
}

func TestRunOfStateFile(t *testing.T) {
	for base, want := range map[string]string{
		"state.json": "", "state.review.json": "review", "state.main.json": "", "state..x.json": "",
		"other.json": "", "state.a.b.json": "", "state.json.bak": "",
	} {
		if got := RunOfStateFile(base); got != want {
			t.Errorf("RunOfStateFile(%q) = %q, want %q", base, got, want)
		}
	}
	ws, _ := NewWorkspace("/w/state.review.json")
	if ws.Run != "review" || ws.LogPath("s", 1) != "/w/.stepseq/runs/review/logs/s/1.log" ||
		ws.LockPath() != "/w/.stepseq/lock" || ws.ReportsRel("s") != ".stepseq/runs/review/reports/s" {
		t.Errorf("run paths: %+v %s %s", ws, ws.LogPath("s", 1), ws.ReportsRel("s"))
	}
	if ws.TryLockPath(0) != "/w/.stepseq/runs/review/agents/try-0.lock" {
		t.Errorf("the try lock is the run's: %s", ws.TryLockPath(0))
	}
	main, _ := NewWorkspace("/w/state.json")
	if main.LogPath("s", 1) != "/w/.stepseq/logs/s/1.log" || main.RunName() != MainRun || main.ReportsRel("s") != ReportsRel("s") {
		t.Errorf("the workspace's own run keeps its paths: %s", main.LogPath("s", 1))
	}
}
