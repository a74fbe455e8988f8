package main

import (
	"slices"
	"testing"

	"github.com/stepseq/stepseq/executor/proc"
)

// compare finds a flag, a value or a subcommand that the help does not show, and
// does not take a longer flag for a shorter one.
func TestCompare(t *testing.T) {
	help := `Usage: codex exec [OPTIONS] [PROMPT]
  -s, --sandbox <SANDBOX_MODE>
          [possible values: read-only, workspace-write, danger-full-access]
      --json-schema <FILE>
      --skip-git-repo-check
`
	p := proc.Preset{Name: "codex", Argv: []string{"codex", "exec", "--json", "--skip-git-repo-check", "-s", "workspace-write", "--color", "never"}, PromptFlag: "-p"}
	missing, checked := compare(p, help)
	if want := []string{"--json", "--color", "never", "-p"}; !slices.Equal(missing, want) || checked != 8 {
		t.Errorf("missing %v of %d, want %v of 8", missing, checked, want)
	}
	claude := `  --output-format <format>   Output format: "text" (default), "json" (choices: "text", "json", "stream-json")
  --permission-mode <mode>   (choices: "acceptEdits", "auto")
  -p, --print                Print response and exit`
	p, _ = proc.LookupPreset("claude")
	if missing, _ := compare(p, claude); len(missing) != 0 {
		t.Errorf("claude's own help lacks %v", missing)
	}
}

// compareResume holds codex's resume form to both helps: the sandbox flag before
// `resume` to exec's, the words after it to resume's own.
func TestCompareResume(t *testing.T) {
	exec := `Usage: codex exec [OPTIONS] [PROMPT]
Commands:
  resume  Resume a previous session by id
  -s, --sandbox <SANDBOX_MODE>  [possible values: read-only, workspace-write]
      --json
      --skip-git-repo-check
`
	resume := `Usage: codex exec resume [OPTIONS] [SESSION_ID] [PROMPT]
      --json
      --skip-git-repo-check
`
	p, _ := proc.LookupPreset("codex")
	if missing, checked := compareResume(p, exec, resume); len(missing) != 0 || checked != 6 {
		t.Errorf("missing %v of %d, want none of 6", missing, checked)
	}
	// A sandbox flag after resume is what codex refuses.
	p.Resume = []string{"codex", "exec", "resume", "-s", "workspace-write", proc.SessionPlaceholder}
	if missing, _ := compareResume(p, exec, resume); !slices.Equal(missing, []string{"resume: -s", "resume: workspace-write"}) {
		t.Errorf("missing %v, want the sandbox flag after resume", missing)
	}
	claude := `  -r, --resume [value]   Resume a conversation by session ID
  --output-format <format>   (choices: "text", "json", "stream-json")
  --permission-mode <mode>   (choices: "acceptEdits", "auto")
  -p, --print                Print response and exit`
	p, _ = proc.LookupPreset("claude")
	if missing, _ := compareResume(p, claude, ""); len(missing) != 0 {
		t.Errorf("claude's resume form: its help lacks %v", missing)
	}
}
