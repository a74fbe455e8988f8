package cli

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
	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/store"
	planpkg "github.com/stepseq/stepseq/planspec/plan"
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
# agent: claude                          # a preset, or a command: [openclaw, agent, --message]; default: STEP_AGENT_CMD
# fallback: [codex, gemini]              # same try, next agent, when one is missing or rate-limited
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

func newInitCmd(g *globals, stdout io.Writer) *cobra.Command {
	var (
		force    bool
		gitHooks bool
		claude   bool
		step     string
	)
	cmd := &cobra.Command{
		Use:   "init [DIR]",
		Short: "Scaffold a plan in DIR/plans and, with --git-hooks, install the git hooks",
		Long: `init writes DIR/plans/example.yaml (default .), a plan to start from, and
DIR/.stepseq/schema.json, which the plan names so that editors complete and check it,
and adds /.stepseq/ to DIR/.gitignore (the journal, logs and lock are not the
project's). It never replaces an example.yaml that differs from its own unless --force.

--git-hooks installs post-commit, post-checkout and post-merge hooks that run
` + "`stepseq trigger STEP`" + ` in the repository holding DIR; a hook already there is kept as
<hook>.local and runs first. The step is git config stepseq.step (--step sets it),
"outline" when unset: the example plan's first step. The hooks never block git:
without state.json they do nothing, without stepseq on PATH they say so in one line.

--claude registers stepseq's MCP server for Claude Code in DIR/.mcp.json, the
project's file: "stepseq mcp", run from PATH in DIR. The file's other servers and
keys are kept; a "stepseq" server that is not stepseq's own is replaced only with
--force. Claude Code asks once to approve a project's server.
` + exitCodesHelp,
		Example: `  stepseq init
  stepseq init --claude               # and register stepseq mcp in ./.mcp.json
  stepseq init ./workspace --git-hooks --step build
  stepseq init --step ""              # turn the hooks off`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: dirCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) > 0 {
				dir = args[0]
			}
			in := initRun{dir: dir, out: stdout, stderr: g.stderr, force: force, claude: claude}
			if cmd.Flags().Changed("step") {
				in.step = &step
			}
			return in.run(gitHooks)
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "replace an example.yaml, or a stepseq server in .mcp.json, that differs from stepseq's")
	cmd.Flags().BoolVar(&claude, "claude", false, "register stepseq's MCP server (stepseq mcp) for Claude Code in DIR/.mcp.json")
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
	claude bool    // --claude: DIR/.mcp.json too
	step   *string // nil: --step not given
}

func (in *initRun) run(gitHooks bool) error {
	plan, err := in.check(gitHooks)
	if err != nil {
		return err
	}
	if err := in.apply(plan); err != nil {
		return err
	}
	fmt.Fprintf(in.out, "next: stepseq validate %s, then STEP_AGENT_CMD='your agent command' stepseq watch %s\n", plan.examplePath, in.dir)
	return nil
}

// initPlan is what an init will write, every refusal checked.
type initPlan struct {
	examplePath, schemaPath string
	example                 []byte
	claudeJSON              []byte // nil: no --claude
	git                     string // git's path, when the hooks or --step need it
	hooks                   []engine.HookInstall
}

// check finds what init would refuse, before anything is written: an example
// plan that is not stepseq's, a Claude configuration it cannot merge, no git for
// the hooks or --step.
func (in *initRun) check(gitHooks bool) (initPlan, error) {
	var plan initPlan
	var err error
	if plan.examplePath, plan.schemaPath, plan.example, err = in.examplePlan(); err != nil {
		return plan, err
	}
	if in.claude {
		if plan.claudeJSON, err = claudeConfig(in.claudePath(), in.force); err != nil {
			return plan, err
		}
	}
	if gitHooks || in.step != nil {
		plan.git, _ = exec.LookPath("git")
	}
	if in.step != nil && plan.git == "" {
		return plan, usageErr("--step sets git config stepseq.step: git is not on PATH")
	}
	if gitHooks {
		hooksDir, err := engine.FindHooksDir(plan.git, in.dir)
		if err != nil {
			return plan, &exitError{code: 1, err: err}
		}
		if plan.hooks, err = engine.PlanHooks(hooksDir, githooks.FS); err != nil {
			return plan, &exitError{code: 1, err: err}
		}
	}
	return plan, nil
}

// examplePlan is the example plan init writes, naming the schema beside it, and
// where both go; an example there that is not stepseq's is refused without
// --force.
func (in *initRun) examplePlan() (examplePath, schemaPath string, example []byte, err error) {
	examplePath = filepath.Join(in.dir, "plans", "example.yaml")
	schemaPath = filepath.Join(in.dir, store.MetaDir, "schema.json")
	schemaRel, err := filepath.Rel(filepath.Dir(examplePath), schemaPath)
	if err != nil {
		return "", "", nil, err
	}
	example = fmt.Appendf(nil, examplePlan, filepath.ToSlash(schemaRel))
	current, err := os.ReadFile(examplePath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return "", "", nil, err
	case !bytes.Equal(current, example) && !in.force:
		return "", "", nil, &exitError{code: 1, err: fmt.Errorf("%s exists and is not stepseq's example: left as it is (give --force to replace it)", examplePath)}
	}
	return examplePath, schemaPath, example, nil
}

// apply writes what check found: the schema and the example, .gitignore, the
// Claude configuration, the hooks and the hooks' step.
func (in *initRun) apply(plan initPlan) error {
	if err := in.write(plan.schemaPath, planpkg.Schema(), 0o644); err != nil {
		return err
	}
	if err := in.write(plan.examplePath, plan.example, 0o644); err != nil {
		return err
	}
	if err := in.ignoreMeta(); err != nil {
		return err
	}
	if plan.claudeJSON != nil {
		if err := in.writeClaude(in.claudePath(), plan.claudeJSON); err != nil {
			return err
		}
	}
	for _, h := range plan.hooks {
		if err := h.Install(in.out); err != nil {
			return err
		}
	}
	if len(plan.hooks) > 0 && plan.git != "" {
		if top := engine.OtherTopLevel(plan.git, in.dir); top != "" {
			fmt.Fprintf(in.stderr, "stepseq: note: the hooks trigger the workspace at the repository's top directory %s, not %s\n", top, in.dir)
		}
	}
	if in.step == nil {
		return nil
	}
	if err := engine.SetHookStep(plan.git, in.dir, *in.step); err != nil {
		return err
	}
	if *in.step == "" {
		fmt.Fprintln(in.out, "set git config stepseq.step to \"\": the hooks trigger nothing")
	} else {
		fmt.Fprintf(in.out, "set git config stepseq.step %s: the hooks re-run it\n", *in.step)
	}
	return nil
}

// ignoreMeta adds .stepseq/ to DIR/.gitignore, creating it or appending once:
// the journal, logs and lock are the machine's, not the project's, and `git add -A`
// must not take them.
func (in *initRun) ignoreMeta() error {
	path := filepath.Join(in.dir, ".gitignore")
	cur, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, line := range strings.Split(string(cur), "\n") {
		switch strings.TrimSpace(line) {
		case store.MetaDir, store.MetaDir + "/", "/" + store.MetaDir, "/" + store.MetaDir + "/":
			fmt.Fprintf(in.out, "%s: ignores %s/ already\n", path, store.MetaDir)
			return nil
		}
	}
	var add bytes.Buffer
	if len(cur) > 0 && !bytes.HasSuffix(cur, []byte("\n")) {
		add.WriteString("\n")
	}
	add.WriteString("# stepseq's journal, logs and lock\n/" + store.MetaDir + "/\n")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(add.Bytes()); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	fmt.Fprintf(in.out, "added /%s/ to %s\n", store.MetaDir, path)
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
