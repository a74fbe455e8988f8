package engine

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/renameio/v2"
)

// hookMarker is the line that tells a hook stepseq installed from someone else's.
const hookMarker = "# stepseq-hook: installed by stepseq init"

// OtherTopLevel returns the repository's top directory when it is not dir: the
// hooks run `stepseq trigger` there, so they would trigger another workspace.
// It returns "" when they are the same or git cannot say.
func OtherTopLevel(git, dir string) string {
	out, err := exec.Command(git, "-C", dir, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return ""
	}
	top := strings.TrimSpace(string(out))
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	if topReal, err := filepath.EvalSymlinks(top); err == nil {
		top = topReal
	}
	if absReal, err := filepath.EvalSymlinks(abs); err == nil {
		abs = absReal
	}
	if top == abs {
		return ""
	}
	return top
}

// SetHookStep sets `git config stepseq.step` in dir's repository: the step the
// hooks trigger ("" turns them off).
func SetHookStep(git, dir, step string) error {
	if out, err := exec.Command(git, "-C", dir, "config", "stepseq.step", step).CombinedOutput(); err != nil {
		return fmt.Errorf("git config stepseq.step: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// FindHooksDir is the hooks folder of the git repository holding dir. git itself
// knows best (core.hooksPath, worktrees); without git on PATH, the .git found by
// walking up from dir says.
func FindHooksDir(git, dir string) (string, error) {
	if git != "" {
		cmd := exec.Command(git, "-C", dir, "rev-parse", "--git-path", "hooks")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			msg, _, _ := strings.Cut(strings.TrimSpace(stderr.String()), "\n")
			return "", fmt.Errorf("%s is not in a git repository: %s", dir, msg)
		}
		p := strings.TrimSpace(string(out))
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		return p, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := abs; ; {
		gitPath := filepath.Join(d, ".git")
		fi, err := os.Stat(gitPath)
		if err == nil {
			if fi.IsDir() {
				return filepath.Join(gitPath, "hooks"), nil
			}
			return linkedHooksDir(d, gitPath)
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("%s is not in a git repository: no .git in it or above it", dir)
		}
		d = parent
	}
}

// linkedHooksDir follows a .git file ("gitdir: PATH", a worktree or a submodule) to
// the hooks of the repository it shares them with.
func linkedHooksDir(top, gitFile string) (string, error) {
	data, err := os.ReadFile(gitFile)
	if err != nil {
		return "", err
	}
	gitdir, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir:")
	if !ok {
		return "", fmt.Errorf("%s: not a gitdir link", gitFile)
	}
	gitdir = strings.TrimSpace(gitdir)
	if !filepath.IsAbs(gitdir) {
		gitdir = filepath.Join(top, gitdir)
	}
	if common, err := os.ReadFile(filepath.Join(gitdir, "commondir")); err == nil {
		c := strings.TrimSpace(string(common))
		if !filepath.IsAbs(c) {
			c = filepath.Join(gitdir, c)
		}
		gitdir = c
	}
	return filepath.Join(gitdir, "hooks"), nil
}

// HookInstall is one hook to install, decided before anything is written.
type HookInstall struct {
	Name, Path string
	content    []byte
	chain      bool // a hook that is not stepseq's is there: keep it as <path>.local
	same       bool // stepseq's hook is there already, as it would be written
}

// PlanHooks decides, for every hook in hooks, what installing it in hooksDir
// takes. A hook that is not stepseq's is never overwritten: it becomes
// <hook>.local, which stepseq's hook runs first. When that name is taken too,
// nothing is installed.
func PlanHooks(hooksDir string, hooks fs.FS) ([]HookInstall, error) {
	entries, err := fs.ReadDir(hooks, ".") // sorted by name
	if err != nil {
		return nil, err
	}
	var out []HookInstall
	for _, e := range entries {
		text, err := fs.ReadFile(hooks, e.Name())
		if err != nil {
			return nil, err
		}
		h := HookInstall{Name: e.Name(), Path: filepath.Join(hooksDir, e.Name()), content: markHook(text, e.Name())}
		if _, err := os.Lstat(h.Path); err == nil {
			cur, _ := os.ReadFile(h.Path)
			switch {
			case isStepseqHook(cur):
				h.same = bytes.Equal(cur, h.content)
			default:
				if _, err := os.Lstat(h.Path + ".local"); err == nil {
					return nil, fmt.Errorf("%s is not stepseq's and %s.local exists too: merge them into %s.local by hand, remove %s, and run init again",
						h.Path, h.Name, h.Name, h.Path)
				}
				h.chain = true
			}
		}
		out = append(out, h)
	}
	return out, nil
}

// markHook adds the marker line after the shebang.
func markHook(text []byte, name string) []byte {
	first, rest, _ := bytes.Cut(text, []byte("\n"))
	var b bytes.Buffer
	b.Write(first)
	fmt.Fprintf(&b, "\n%s; your own %s hook goes in %s.local\n", hookMarker, name, name)
	b.Write(rest)
	return b.Bytes()
}

// isStepseqHook recognises stepseq's hooks: installed by init (the marker), or
// copied by hand from examples/git-hooks.
func isStepseqHook(text []byte) bool {
	return bytes.Contains(text, []byte(hookMarker)) || bytes.Contains(text, []byte(`stepseq trigger "$step"`))
}

// Install writes the hook, keeping a hook that was there as <hook>.local, and
// says what it did.
func (h HookInstall) Install(out io.Writer) error {
	if h.same {
		fmt.Fprintf(out, "%s: up to date\n", h.Path)
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(h.Path), 0o755); err != nil {
		return err
	}
	if h.chain {
		if err := os.Rename(h.Path, h.Path+".local"); err != nil {
			return fmt.Errorf("keep %s as %s.local: %w", h.Path, h.Name, err)
		}
	}
	if err := renameio.WriteFile(h.Path, h.content, 0o755); err != nil {
		return fmt.Errorf("install %s: %w", h.Path, err)
	}
	if err := os.Chmod(h.Path, 0o755); err != nil { // the umask may have taken the x bits
		return err
	}
	if h.chain {
		fmt.Fprintf(out, "installed %s (the hook that was there is now %s.local and runs first)\n", h.Path, h.Name)
	} else {
		fmt.Fprintf(out, "installed %s\n", h.Path)
	}
	return nil
}
