package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/renameio/v2"
	"github.com/spf13/cobra"

	githooks "github.com/stepseq/stepseq/examples/git-hooks"
	"github.com/stepseq/stepseq/executor"
	"github.com/stepseq/stepseq/planspec"
)

// examplePlan is the plan `stepseq init` writes: two steps that show outputs, a
// gate and a check, harmless for any agent. %s is the schema's path relative to
// the plans folder.
const examplePlan = `# yaml-language-server: $schema=%s
# An example plan, written by stepseq init. stepseq launches your agent once per
# step (STEP_AGENT_CMD, or agent: below) with the step's instruction as the
# prompt, and goes on once the step's requiredOutputs exist. A running
# "stepseq watch" applies this file as soon as it is saved; check it first with
# "stepseq validate". Every key: "stepseq schema".
name: example
# agent: [openclaw, agent, --message]   # default: STEP_AGENT_CMD
# stepDelay: 2m                          # wait between steps
steps:
  - id: outline
    title: Outline the notes
    instruction: >-
      Write notes/outline.md: an outline, five bullet points, of what this
      workspace is for.
    requiredOutputs: [notes/outline.md]
  - id: summary
    title: Summarise the outline
    instruction: Read notes/outline.md and write a one-paragraph summary to notes/summary.md.
    when: exists("notes/outline.md")
    check: size("notes/summary.md") > 0
    requiredOutputs: [notes/summary.md]
`

// hookMarker is the line that tells a hook stepseq installed from someone else's.
const hookMarker = "# stepseq-hook: installed by stepseq init"

func newInitCmd(g *globals, stdout io.Writer) *cobra.Command {
	var (
		force    bool
		gitHooks bool
		step     string
	)
	cmd := &cobra.Command{
		Use:   "init [DIR]",
		Short: "Scaffold a plan in DIR/plans and, with --git-hooks, install the git hooks",
		Long: "init writes DIR/plans/example.yaml (default .), a plan to start from, and DIR/.stepseq/schema.json, " +
			"which the plan names so that editors complete and check it. It never replaces an example.yaml that " +
			"differs from its own unless --force. --git-hooks installs post-commit, post-checkout and post-merge " +
			"hooks that run `stepseq trigger` in the repository holding DIR; a hook already there is kept as " +
			"<hook>.local and runs first. --step sets the step the hooks re-run (git config stepseq.step).",
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: dirCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) > 0 {
				dir = args[0]
			}
			in := initRun{dir: dir, out: stdout, stderr: g.stderr, force: force}
			if cmd.Flags().Changed("step") {
				in.step = &step
			}
			return in.run(gitHooks)
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "replace an example.yaml that differs from stepseq's")
	cmd.Flags().BoolVar(&gitHooks, "git-hooks", false, "install post-commit, post-checkout and post-merge hooks in the repository holding DIR")
	cmd.Flags().StringVar(&step, "step", "", `the step the git hooks re-run (git config stepseq.step); "" turns them off`)
	return cmd
}

// initRun is one `stepseq init`. Everything that can refuse is checked before
// anything is written, so a refused init leaves the workspace as it was.
type initRun struct {
	dir    string
	out    io.Writer
	stderr io.Writer
	force  bool
	step   *string // nil: --step not given
}

func (in *initRun) run(gitHooks bool) error {
	examplePath := filepath.Join(in.dir, "plans", "example.yaml")
	schemaPath := filepath.Join(in.dir, executor.MetaDir, "schema.json")
	schemaRel, err := filepath.Rel(filepath.Dir(examplePath), schemaPath)
	if err != nil {
		return err
	}
	example := fmt.Appendf(nil, examplePlan, filepath.ToSlash(schemaRel))
	current, err := os.ReadFile(examplePath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case !bytes.Equal(current, example) && !in.force:
		return &exitError{code: 1, err: fmt.Errorf("%s exists and is not stepseq's example: left as it is (give --force to replace it)", examplePath)}
	}

	var git string
	if gitHooks || in.step != nil {
		git, _ = exec.LookPath("git")
	}
	if in.step != nil && git == "" {
		return usageErr("--step sets git config stepseq.step: git is not on PATH")
	}
	var hooks []hookInstall
	if gitHooks {
		hooksDir, err := findHooksDir(git, in.dir)
		if err != nil {
			return &exitError{code: 1, err: err}
		}
		if hooks, err = planHooks(hooksDir); err != nil {
			return &exitError{code: 1, err: err}
		}
	}

	if err := in.write(schemaPath, planspec.Schema(), 0o644); err != nil {
		return err
	}
	if err := in.write(examplePath, example, 0o644); err != nil {
		return err
	}
	for _, h := range hooks {
		if err := h.install(in.out); err != nil {
			return err
		}
	}
	if len(hooks) > 0 && git != "" {
		in.warnTopLevel(git)
	}
	if in.step != nil {
		if out, err := exec.Command(git, "-C", in.dir, "config", "stepseq.step", *in.step).CombinedOutput(); err != nil {
			return fmt.Errorf("git config stepseq.step: %v: %s", err, strings.TrimSpace(string(out)))
		}
		if *in.step == "" {
			fmt.Fprintln(in.out, "set git config stepseq.step to \"\": the hooks trigger nothing")
		} else {
			fmt.Fprintf(in.out, "set git config stepseq.step %s: the hooks re-run it\n", *in.step)
		}
	}
	fmt.Fprintf(in.out, "next: stepseq validate %s, then STEP_AGENT_CMD='your agent command' stepseq watch %s\n", examplePath, in.dir)
	return nil
}

// write replaces path with data atomically, so that a sidecar watching the plans
// folder never judges half a file, and says what it did.
func (in *initRun) write(path string, data []byte, perm fs.FileMode) error {
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, data) {
		fmt.Fprintf(in.out, "%s: up to date\n", path)
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := renameio.WriteFile(path, data, perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	fmt.Fprintf(in.out, "wrote %s\n", path)
	return nil
}

// warnTopLevel says when the hooks will trigger another workspace than DIR: they
// run `stepseq trigger` in the repository's top directory.
func (in *initRun) warnTopLevel(git string) {
	out, err := exec.Command(git, "-C", in.dir, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return
	}
	top := strings.TrimSpace(string(out))
	abs, err := filepath.Abs(in.dir)
	if err != nil {
		return
	}
	if topReal, err := filepath.EvalSymlinks(top); err == nil {
		top = topReal
	}
	if absReal, err := filepath.EvalSymlinks(abs); err == nil {
		abs = absReal
	}
	if top != abs {
		fmt.Fprintf(in.stderr, "stepseq: note: the hooks trigger the workspace at the repository's top directory %s, not %s\n", top, in.dir)
	}
}

// findHooksDir is the hooks folder of the git repository holding dir. git itself
// knows best (core.hooksPath, worktrees); without git on PATH, the .git found by
// walking up from dir says.
func findHooksDir(git, dir string) (string, error) {
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

// hookInstall is one hook to install, decided before anything is written.
type hookInstall struct {
	name, path string
	content    []byte
	chain      bool // a hook that is not stepseq's is there: keep it as <path>.local
	same       bool // stepseq's hook is there already, as it would be written
}

// planHooks decides, for every hook stepseq ships, what installing it takes. A
// hook that is not stepseq's is never overwritten: it becomes <hook>.local, which
// stepseq's hook runs first. When that name is taken too, nothing is installed.
func planHooks(hooksDir string) ([]hookInstall, error) {
	entries, err := fs.ReadDir(githooks.FS, ".") // sorted by name
	if err != nil {
		return nil, err
	}
	var out []hookInstall
	for _, e := range entries {
		text, err := fs.ReadFile(githooks.FS, e.Name())
		if err != nil {
			return nil, err
		}
		h := hookInstall{name: e.Name(), path: filepath.Join(hooksDir, e.Name()), content: markHook(text, e.Name())}
		if _, err := os.Lstat(h.path); err == nil {
			cur, _ := os.ReadFile(h.path)
			switch {
			case isStepseqHook(cur):
				h.same = bytes.Equal(cur, h.content)
			default:
				if _, err := os.Lstat(h.path + ".local"); err == nil {
					return nil, fmt.Errorf("%s is not stepseq's and %s.local exists too: merge them into %s.local by hand, remove %s, and run init again",
						h.path, h.name, h.name, h.path)
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

func (h hookInstall) install(out io.Writer) error {
	if h.same {
		fmt.Fprintf(out, "%s: up to date\n", h.path)
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(h.path), 0o755); err != nil {
		return err
	}
	if h.chain {
		if err := os.Rename(h.path, h.path+".local"); err != nil {
			return fmt.Errorf("keep %s as %s.local: %w", h.path, h.name, err)
		}
	}
	if err := renameio.WriteFile(h.path, h.content, 0o755); err != nil {
		return fmt.Errorf("install %s: %w", h.path, err)
	}
	if err := os.Chmod(h.path, 0o755); err != nil { // the umask may have taken the x bits
		return err
	}
	if h.chain {
		fmt.Fprintf(out, "installed %s (the hook that was there is now %s.local and runs first)\n", h.path, h.name)
	} else {
		fmt.Fprintf(out, "installed %s\n", h.path)
	}
	return nil
}
