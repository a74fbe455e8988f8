package fleet

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The git side of a run: its workspace is a clone, and each verified step is
// a commit pushed to the run's branch. Pushes are compare-and-set too
// (--force-with-lease on the commit the worker last saw there), so that a
// worker that lost its lease cannot overwrite the branch of the one that took
// the run over.

// RunBranch is the branch a run's verified steps are pushed to.
func RunBranch(run string) string { return "stepseq/" + run }

// git runs git in dir with no prompt for credentials (a worker has no one to
// ask) and returns its stdout; a failure carries git's stderr.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=true", "LC_ALL=C")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		// git's lines, on one: the reason goes into a record and a table.
		var lines []string
		for _, l := range strings.Split(errb.String(), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
		msg := strings.Join(lines, "; ")
		if msg == "" {
			msg = err.Error()
		}
		if errors.Is(err, exec.ErrNotFound) {
			msg = "git is not on PATH"
		}
		return "", fmt.Errorf("git %s: %s", args[0], msg)
	}
	return out.String(), nil
}

// remoteRefs lists the repository's branches (name → commit) and the branch
// its HEAD names.
func remoteRefs(ctx context.Context, repo string) (branches map[string]string, head string, err error) {
	out, err := git(ctx, "", "ls-remote", "--symref", repo)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %s: %w", ErrRepo, repo, err)
	}
	branches = map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if target, ok := strings.CutPrefix(line, "ref: "); ok {
			ref, name, _ := strings.Cut(target, "\t")
			if name == "HEAD" {
				head = strings.TrimPrefix(ref, "refs/heads/")
			}
			continue
		}
		sha, ref, ok := strings.Cut(line, "\t")
		if name, isBranch := strings.CutPrefix(ref, "refs/heads/"); ok && isBranch {
			branches[name] = sha
		}
	}
	return branches, head, nil
}

// ResolveRepo checks that repo is a git repository this machine can read and
// that it has branch, and returns the repository as workers will read it (a
// local path made absolute) and the branch (its default branch when none is
// given).
func ResolveRepo(ctx context.Context, repo, branch string) (string, string, error) {
	if fi, err := os.Stat(repo); err == nil && fi.IsDir() {
		if abs, err := filepath.Abs(repo); err == nil {
			repo = abs
		}
	}
	branches, head, err := remoteRefs(ctx, repo)
	if err != nil {
		return "", "", err
	}
	if branch == "" {
		branch = head
	}
	if branch == "" {
		return "", "", fmt.Errorf("%w: %s has no branch to run on: push a commit to it, or name one with --branch", ErrRepo, repo)
	}
	if _, ok := branches[branch]; !ok {
		return "", "", fmt.Errorf("%w: %s has no branch %q (it has %s)", ErrRepo, repo, branch, branchList(branches))
	}
	return repo, branch, nil
}

func branchList(branches map[string]string) string {
	if len(branches) == 0 {
		return "none"
	}
	names := make([]string, 0, len(branches))
	for n := range branches {
		names = append(names, n)
	}
	return strings.Join(names, ", ")
}

// checkout is a run's workspace on disk: a clone on the run's branch.
type checkout struct {
	dir    string
	branch string // stepseq/RUN
	pushed string // the commit stepseq/RUN holds on the remote; "": it does not exist
}

// cloneRun clones the run's branch when the remote has it (a run resumed),
// else base, into dir, which must not exist, and puts the workspace's own
// files out of git's sight. first says no worker has taken the run before:
// its branch cannot exist, and the remote is not asked.
func cloneRun(ctx context.Context, repo, base, run, dir string, first bool) (*checkout, error) {
	co := &checkout{dir: dir, branch: RunBranch(run)}
	if !first {
		branches, _, err := remoteRefs(ctx, repo)
		if err != nil {
			return nil, err
		}
		co.pushed = branches[co.branch]
	}
	from := base
	if co.pushed != "" {
		from = co.branch
	}
	if _, err := git(ctx, "", "clone", "--quiet", "--branch", from, "--", repo, dir); err != nil {
		return nil, fmt.Errorf("clone %s (branch %s) into %s: %w", repo, from, dir, err)
	}
	if co.pushed == "" {
		if _, err := git(ctx, dir, "checkout", "--quiet", "-b", co.branch); err != nil {
			return nil, err
		}
	}
	exclude := filepath.Join(dir, ".git", "info", "exclude")
	if err := os.MkdirAll(filepath.Dir(exclude), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(exclude, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	// The sidecar's own files (locks, logs, journal) are the worker's, not the run's.
	_, err = f.WriteString("\n/.stepseq/\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return co, err
}

// commit records every change of the workspace as one commit; changed is
// false when there was none.
func (co *checkout) commit(ctx context.Context, who, msg string) (changed bool, err error) {
	if _, err := git(ctx, co.dir, "add", "--all"); err != nil {
		return false, err
	}
	// A verified step always changes state.json: the commit is tried first,
	// and only its failure asks whether there was nothing to commit.
	_, err = git(ctx, co.dir, "-c", "user.name=stepseq worker "+who, "-c", "user.email=stepseq@"+sanitizeEmail(who),
		"commit", "--quiet", "--no-verify", "-m", msg)
	if err != nil {
		if _, derr := git(ctx, co.dir, "diff", "--cached", "--quiet"); derr == nil {
			return false, nil
		}
	}
	return err == nil, err
}

// push pushes the branch's head, as read now, to the run's branch, provided
// the remote still holds what this worker last saw there. The commit is named
// rather than HEAD: a step may be committed while the push runs.
func (co *checkout) push(ctx context.Context) (string, error) {
	head, err := co.head(ctx)
	if err != nil {
		return "", err
	}
	if head == co.pushed {
		return head, nil
	}
	ref := "refs/heads/" + co.branch
	if _, err := git(ctx, co.dir, "push", "--quiet", "--force-with-lease="+ref+":"+co.pushed, "origin", head+":"+ref); err != nil {
		return "", fmt.Errorf("push to %s: %w", co.branch, err)
	}
	co.pushed = head
	return head, nil
}

func sanitizeEmail(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			return r
		}
		return '-'
	}, s)
}

// head is the commit the run's branch names: read from its ref file, as git
// writes it after a commit, else asked of git (a packed ref).
func (co *checkout) head(ctx context.Context) (string, error) {
	data, err := os.ReadFile(filepath.Join(co.dir, ".git", "refs", "heads", filepath.FromSlash(co.branch)))
	if sha := strings.TrimSpace(string(data)); err == nil && len(sha) >= 40 {
		return sha, nil
	}
	out, err := git(ctx, co.dir, "rev-parse", "HEAD")
	return strings.TrimSpace(out), err
}
