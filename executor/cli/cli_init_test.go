package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	githooks "github.com/stepseq/stepseq/examples/git-hooks"
	"github.com/stepseq/stepseq/planspec/plan"
)

// TestInitRun_IgnoreMeta: .stepseq/ is added to .gitignore once, on a line of its
// own even when the file lacks a final newline.
func TestInitRun_IgnoreMeta(t *testing.T) {
	for _, tc := range []struct{ name, before, after string }{
		{"none", "", "# stepseq's journal, logs and lock\n/.stepseq/\n"},
		{"no final newline", "*.log", "*.log\n# stepseq's journal, logs and lock\n/.stepseq/\n"},
		{"there already", "a\n.stepseq\n", "a\n.stepseq\n"},
		{"there already, anchored", "/.stepseq/\n", "/.stepseq/\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, ".gitignore")
			if tc.before != "" {
				if err := os.WriteFile(path, []byte(tc.before), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			in := initRun{dir: dir, out: &bytes.Buffer{}}
			for range 2 {
				if err := in.ignoreMeta(); err != nil {
					t.Fatal(err)
				}
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.after {
				t.Fatalf(".gitignore is %q, want %q", got, tc.after)
			}
		})
	}
}

// TestGitHooks_DefaultStepInExamplePlan: the step the hooks re-run when git config
// names none is a step of the plan init writes.
func TestGitHooks_DefaultStepInExamplePlan(t *testing.T) {
	p, err := plan.ParsePlan(strings.NewReader(strings.Replace(examplePlan, "%s", "schema.json", 1)), "example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range p.Steps {
		ids = append(ids, s.ID)
	}
	def := regexp.MustCompile(`step=\$\(git config --get stepseq\.step\) \|\| step=(\S+)`)
	for _, name := range []string{"post-commit", "post-checkout", "post-merge"} {
		text, err := githooks.FS.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		m := def.FindSubmatch(text)
		if m == nil {
			t.Fatalf("%s: no default step", name)
		}
		if !slices.Contains(ids, string(m[1])) {
			t.Errorf("%s: the default step %s is not in the example plan's steps %v", name, m[1], ids)
		}
	}
}
