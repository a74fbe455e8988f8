package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFindHooksDir_WithoutGit: without git on PATH the hooks folder is found by
// walking up to .git, a directory or a worktree's gitdir link.
func TestFindHooksDir_WithoutGit(t *testing.T) {
	root := t.TempDir()
	mk := func(p string) string {
		t.Helper()
		p = filepath.Join(root, p)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write := func(p, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(root, p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk("repo/.git")
	sub := mk("repo/a/b")
	mk("main/.git/worktrees/wt")
	write("main/.git/worktrees/wt/commondir", "../..\n")
	wt := mk("wt")
	write("wt/.git", "gitdir: ../main/.git/worktrees/wt\n")
	none := mk("none")

	tests := []struct {
		dir, want string
	}{
		{sub, filepath.Join(root, "repo/.git/hooks")},
		{wt, filepath.Join(root, "main/.git/hooks")},
	}
	for _, tt := range tests {
		got, err := FindHooksDir("", tt.dir)
		if err != nil || got != tt.want {
			t.Errorf("FindHooksDir(%s) = %q, %v; want %q", tt.dir, got, err, tt.want)
		}
	}
	if _, err := FindHooksDir("", none); err == nil || !strings.Contains(err.Error(), "not in a git repository") {
		// t.TempDir is not inside a repository on any machine that runs these tests.
		t.Errorf("FindHooksDir(%s) = %v, want not in a git repository", none, err)
	}
}
