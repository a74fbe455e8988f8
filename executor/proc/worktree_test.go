package proc

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func repo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	gitT(t, dir, "init", "-q", "-b", "main")
	gitT(t, dir, "config", "user.email", "t@example.com")
	gitT(t, dir, "config", "user.name", "t")
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte("base\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "base")
	return dir
}

// branchWith makes branch from HEAD with content in f.txt, in a worktree that
// is committed and removed.
func branchWith(t *testing.T, dir, branch, file, content string) {
	t.Helper()
	head, err := HeadCommit(dir)
	if err != nil {
		t.Fatal(err)
	}
	w := Worktree{Path: filepath.Join(dir, ".wt", branch), Branch: branch, Base: head}
	if err := AddWorktree(dir, w, false); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.Path, file), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := CommitWorktree(w.Path, "work on "+branch); err != nil {
		t.Fatal(err)
	}
	if err := RemoveWorktree(dir, w.Path); err != nil {
		t.Fatal(err)
	}
}

func TestMergeBranches(t *testing.T) {
	dir := repo(t)
	branchWith(t, dir, "x", "x.txt", "x\n")
	branchWith(t, dir, "y", "y.txt", "y\n")
	if err := MergeBranches(dir, []string{"x", "y"}, func(b string) string { return "merge " + b }); err != nil {
		t.Fatal(err)
	}
	if got := gitT(t, dir, "log", "--format=%s", "-2"); got != "merge y\nmerge x" {
		t.Errorf("log:\n%s", got)
	}
}

// A conflict aborts its merge and undoes the ones before it: nothing is half
// merged, and the conflict names the path and the branches.
func TestMergeBranches_ConflictUndoesTheJoin(t *testing.T) {
	dir := repo(t)
	head := gitT(t, dir, "rev-parse", "HEAD")
	branchWith(t, dir, "ok", "ok.txt", "ok\n")
	branchWith(t, dir, "a", "f.txt", "a\n")
	branchWith(t, dir, "b", "f.txt", "b\n")
	err := MergeBranches(dir, []string{"ok", "a", "b"}, func(b string) string { return "merge " + b })
	var c *Conflict
	if !errors.As(err, &c) {
		t.Fatalf("err %v, want a *Conflict", err)
	}
	if c.Branch != "b" || strings.Join(c.Before, ",") != "ok,a" || strings.Join(c.Paths, ",") != "f.txt" {
		t.Errorf("conflict %+v", c)
	}
	if got := gitT(t, dir, "rev-parse", "HEAD"); got != head {
		t.Errorf("HEAD %s, want %s: the merges before the conflict stay", got, head)
	}
	if s := gitT(t, dir, "status", "--porcelain", "--untracked-files=no"); s != "" {
		t.Errorf("not clean:\n%s", s)
	}
	if !strings.Contains(err.Error(), "merge conflict in f.txt between b and the workspace's branch with ok, a merged") {
		t.Errorf("message %q", err)
	}
}

func TestGitRepo(t *testing.T) {
	if err := GitRepo(t.TempDir()); !errors.Is(err, ErrNotGit) || !strings.Contains(err.Error(), "git init") {
		t.Errorf("a plain folder: %v", err)
	}
	empty := t.TempDir()
	gitT(t, empty, "init", "-q")
	if err := GitRepo(empty); !errors.Is(err, ErrNotGit) || !strings.Contains(err.Error(), "git commit") {
		t.Errorf("no commit: %v", err)
	}
	if err := GitRepo(repo(t)); err != nil {
		t.Error(err)
	}
}

// A worktree whose branch is taken fails with git's message and leaves no folder.
func TestAddWorktree_BranchTaken(t *testing.T) {
	dir := repo(t)
	gitT(t, dir, "branch", "taken")
	head, _ := HeadCommit(dir)
	w := Worktree{Path: filepath.Join(dir, ".wt", "taken"), Branch: "taken", Base: head}
	err := AddWorktree(dir, w, false)
	if err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("err %v", err)
	}
	if _, serr := os.Stat(w.Path); !os.IsNotExist(serr) {
		t.Error("a folder was left")
	}
}
