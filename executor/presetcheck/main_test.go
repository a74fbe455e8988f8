package main

import (
	"slices"
	"testing"

	"github.com/stepseq/stepseq/executor"
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
	p := executor.Preset{Name: "codex", Argv: []string{"codex", "exec", "--json", "--skip-git-repo-check", "-s", "workspace-write", "--color", "never"}, PromptFlag: "-p"}
	missing, checked := compare(p, help)
	if want := []string{"--json", "--color", "never", "-p"}; !slices.Equal(missing, want) || checked != 8 {
		t.Errorf("missing %v of %d, want %v of 8", missing, checked, want)
	}
	claude := `  --output-format <format>   Output format: "text" (default), "json" (choices: "text", "json", "stream-json")
  --permission-mode <mode>   (choices: "acceptEdits", "auto")
  -p, --print                Print response and exit`
	p, _ = executor.LookupPreset("claude")
	if missing, _ := compare(p, claude); len(missing) != 0 {
		t.Errorf("claude's own help lacks %v", missing)
	}
}
