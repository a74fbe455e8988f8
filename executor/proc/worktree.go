package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Worktrees: a step instance with worktree: true runs in a git worktree of its
// own, on a branch of its own, made and merged back through the git command
// (no library: the user's git, hooks and configuration are the ones that
// apply). Each call runs git with the workspace (or the worktree) as its
// directory and returns git's own words when it fails.

// ErrNotGit is matched by GitRepo's refusal of a folder that is not in a git
// repository.
var ErrNotGit = errors.New("not a git repository")

// gitTimeout bounds one git command: a hook or a lock held by another git may
// hang it.
var gitTimeout = 2 * time.Minute

// git runs git with args in dir and returns its trimmed stdout; an error
// carries git's stderr.
func git(dir string, env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), gitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if msg == "" {
			msg = strings.TrimSpace(out.String())
		}
		if msg == "" {
			msg = err.Error()
		}
		return strings.TrimSpace(out.String()), fmt.Errorf("git %s: %s", args[0], msg)
	}
	return strings.TrimSpace(out.String()), nil
}

// gitQuiet is git without the repository's hooks: stepseq's own commits and
// merges are bookkeeping, and the hooks stepseq installs would take them for a
// person's change and trigger a step.
func gitQuiet(dir string, env []string, args ...string) (string, error) {
	out, err := git(dir, env, append([]string{"-c", "core.hooksPath=" + os.DevNull}, args...)...)
	if err != nil {
		err = errors.New(strings.Replace(err.Error(), "git -c:", "git "+args[0]+":", 1))
	}
	return out, err
}

// GitRepo says why dir cannot hold worktrees: it is not inside a git work tree,
// or the repository has no commit to cut a branch from. nil when it can.
func GitRepo(dir string) error {
	if _, err := exec.LookPath("git"); err != nil {
		return fmt.Errorf("%s: %w: git is not on PATH; install git, then run git init in %s", dir, ErrNotGit, dir)
	}
	if out, err := git(dir, nil, "rev-parse", "--is-inside-work-tree"); err != nil || out != "true" {
		return fmt.Errorf("%s: %w: steps with worktree: true run in git worktrees; run git init in %s and commit what the steps start from", dir, ErrNotGit, dir)
	}
	if _, err := git(dir, nil, "rev-parse", "--verify", "HEAD^{commit}"); err != nil {
		return fmt.Errorf("%s: %w yet: the repository has no commit to cut the steps' branches from; commit what the steps start from (git add -A && git commit)", dir, ErrNotGit)
	}
	return nil
}

// Worktree is a step instance's git worktree: its folder, its branch and the
// commit the branch was cut from.
type Worktree struct {
	Path   string
	Branch string
	Base   string
}

// HeadCommit is the commit dir's HEAD names.
func HeadCommit(dir string) (string, error) {
	return git(dir, nil, "rev-parse", "--verify", "HEAD^{commit}")
}

// IsWorktree reports whether path is a worktree of the repository at repo on
// branch.
func IsWorktree(repo, path, branch string) bool {
	out, err := git(repo, nil, "worktree", "list", "--porcelain")
	if err != nil {
		return false
	}
	want := "worktree " + path
	for _, block := range strings.Split(out, "\n\n") {
		if strings.HasPrefix(block, want+"\n") && strings.Contains(block, "\nbranch refs/heads/"+branch) {
			return true
		}
	}
	return false
}

// AddWorktree makes w: an existing worktree of w's branch at w.Path is taken as
// it is (a try after an interrupted one); a branch of ours (own) already made
// is checked out there; otherwise a new branch is cut from w.Base. A failure
// is git's message, and leaves no folder behind.
func AddWorktree(repo string, w Worktree, own bool) error {
	if IsWorktree(repo, w.Path, w.Branch) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(w.Path), 0o755); err != nil {
		return fmt.Errorf("worktree %s: %w", w.Path, err)
	}
	args := []string{"worktree", "add", "-b", w.Branch, w.Path, w.Base}
	if own && branchExists(repo, w.Branch) {
		args = []string{"worktree", "add", w.Path, w.Branch}
	}
	if _, err := git(repo, nil, args...); err != nil {
		_ = os.RemoveAll(w.Path)
		_, _ = git(repo, nil, "worktree", "prune")
		return err
	}
	return nil
}

func branchExists(repo, branch string) bool {
	_, err := git(repo, nil, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch)
	return err == nil
}

// commitIdentity is who commits when git knows no one: stepseq itself.
func commitIdentity(dir string) []string {
	if name, _ := git(dir, nil, "config", "user.email"); name != "" {
		return nil
	}
	return []string{"GIT_AUTHOR_NAME=stepseq", "GIT_AUTHOR_EMAIL=stepseq@localhost",
		"GIT_COMMITTER_NAME=stepseq", "GIT_COMMITTER_EMAIL=stepseq@localhost"}
}

// CommitWorktree commits everything the try changed in the worktree at path,
// with message, and returns the branch's commit: the one made, or the one it
// stood at when there was nothing to commit.
func CommitWorktree(path, message string) (string, error) {
	if _, err := git(path, nil, "add", "-A"); err != nil {
		return "", err
	}
	if _, err := git(path, nil, "diff", "--cached", "--quiet"); err != nil {
		if _, err := gitQuiet(path, commitIdentity(path), "commit", "-q", "-m", message); err != nil {
			return "", err
		}
	}
	return HeadCommit(path)
}

// RemoveWorktree removes the worktree at path, whatever it holds, and keeps
// its branch.
func RemoveWorktree(repo, path string) error {
	_, err := git(repo, nil, "worktree", "remove", "--force", path)
	if err != nil {
		if _, serr := os.Stat(path); errors.Is(serr, os.ErrNotExist) {
			err = nil
		} else if rerr := os.RemoveAll(path); rerr == nil {
			err = nil
		}
	}
	_, _ = git(repo, nil, "worktree", "prune")
	return err
}

// Conflict is a merge at a join that could not be made: the branch whose merge
// stopped, the branches merged before it in the same join (undone with it),
// and the paths in conflict.
type Conflict struct {
	Branch string
	Before []string
	Paths  []string
	Msg    string // git's words when no path is in conflict (local changes in the way)
}

func (c *Conflict) Error() string {
	with := "the workspace's branch"
	if len(c.Before) > 0 {
		with += " with " + strings.Join(c.Before, ", ") + " merged"
	}
	if len(c.Paths) == 0 {
		return fmt.Sprintf("merging %s into %s failed: %s; nothing was merged", c.Branch, with, c.Msg)
	}
	return fmt.Sprintf("merge conflict in %s between %s and %s; nothing was merged: resolve it (git merge %s), then stepseq retry",
		strings.Join(c.Paths, ", "), c.Branch, with, c.Branch)
}

// MergeBranches merges branches into the workspace's branch at repo, in order,
// each as a merge commit. The join is one: when a merge fails, it is aborted
// and the merges before it are undone, so that nothing is left half-merged,
// and a *Conflict says where.
func MergeBranches(repo string, branches []string, message func(branch string) string) error {
	start, err := HeadCommit(repo)
	if err != nil {
		return err
	}
	id := commitIdentity(repo)
	for i, b := range branches {
		_, err := gitQuiet(repo, id, "merge", "--no-ff", "--no-edit", "-m", message(b), b)
		if err == nil {
			continue
		}
		c := &Conflict{Branch: b, Before: branches[:i], Msg: strings.TrimPrefix(err.Error(), "git merge: ")}
		if out, _ := git(repo, nil, "diff", "--name-only", "--diff-filter=U"); out != "" {
			c.Paths = strings.Split(out, "\n")
		}
		_, _ = git(repo, nil, "merge", "--abort")
		if i > 0 {
			if _, rerr := git(repo, nil, "reset", "--keep", start); rerr != nil {
				return fmt.Errorf("%w; undoing the merges before it: %v", c, rerr)
			}
		}
		return c
	}
	return nil
}

// DeleteBranch deletes a branch that was merged.
func DeleteBranch(repo, branch string) error {
	_, err := git(repo, nil, "branch", "-d", branch)
	return err
}

// Worktrees lists the folders under dir (a run's worktree folder), as paths.
func Worktrees(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}
