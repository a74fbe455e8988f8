package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidate_SaysSandboxes: validate names the sandboxed steps with what
// their sandbox adds, the steps whose preset edits unattended without one, and
// what a sandbox keeps from working.
func TestValidate_SaysSandboxes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plan.yaml")
	const src = `agent: claude
steps:
  - {id: a, title: A, instruction: do a}
  - {id: b, title: B, instruction: do b, sandbox: {network: false, write: [out]}, requiredOutputs: [report.md], awaitOutputs: 10s}
  - {id: c, title: C, instruction: do c, sandbox: true, requiredOutputs: [out/c.md]}
`
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"validate", path}, &out, &errOut); err != nil {
		t.Fatalf("validate: %v\n%s", err, errOut.String())
	}
	for _, want := range []string{
		path + ": sandboxed: b (no network, write: out); c\n",
		path + ": unattended edits without a sandbox: a: claude (sandbox: true, or --sandbox)\n",
		path + ": warning: sandbox: b: awaitOutputs waits for a background job",
		path + ": warning: sandbox: b: required output report.md lies at the workspace's top",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("validate's output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "c: required output") {
		t.Errorf("a required output in a folder was warned of:\n%s", out.String())
	}
}

// TestStatus_SaysSandboxes: status says which steps run sandboxed.
func TestStatus_SaysSandboxes(t *testing.T) {
	dir := t.TempDir()
	const st = `{"plan":{"steps":{"a":{"title":"A","instruction":"do a","sandbox":{"network":false}},"b":{"title":"B","instruction":"do b","agent":"codex"}}},
 "stepQueue":["a","b"],"currentStep":0,"stepRuns":{},"stepDelayMinutes":0,"blockers":[],"status":"IN_PROGRESS"}`
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(st), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	_ = run(context.Background(), []string{"status", dir}, &out, &errOut)
	for _, want := range []string{"sandboxed: a (no network)\n", "unattended edits without a sandbox: b: codex"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s\n%s", want, out.String(), errOut.String())
		}
	}
}
