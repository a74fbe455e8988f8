package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestOutputPaths(t *testing.T) {
	tests := []struct {
		name   string
		prompt string
		want   []string
	}{
		{"direct", "Research solar power and write study/summary.md", []string{"study/summary.md"}},
		{"words then to", "Research topic X and write a concise summary to study/summary.md", []string{"study/summary.md"}},
		{"it to", "Summarise the notes and write it to notes/summary.txt.", []string{"notes/summary.txt"}},
		{"writes", "A step that writes report.json", []string{"report.json"}},
		{"capitalised", "Write outline.md from the summary", []string{"outline.md"}},
		{"full stop ends the sentence", "Using outline.md, write paper/draft.md.", []string{"paper/draft.md"}},
		{"several in order", "write a.md, then write b/c.txt and write a.md again", []string{"a.md", "b/c.txt"}},
		{"a mention is not a write", "Using study/summary.md, review the notes", nil},
		{"needs an extension", "write the paper", nil},
		{"to after a comma is not ours", "write tests, then copy them to x.md", nil},
		{"word starting with to", "write tomorrow.md", []string{"tomorrow.md"}},
		{"absolute kept for the caller to refuse", "write /etc/motd.txt", []string{"/etc/motd.txt"}},
		{"escaping kept for the caller to refuse", "write ../outside.md", []string{"../outside.md"}},
		{"retry prompt", "Step draft failed (tries: 1). Previous run ended with: simulated failure: upstream timed out. Please troubleshoot and retry: (flaky) Using outline.md, write paper/draft.md", []string{"paper/draft.md"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := outputPaths(tt.prompt); !slices.Equal(got, tt.want) {
				t.Errorf("outputPaths(%q) = %q, want %q", tt.prompt, got, tt.want)
			}
		})
	}
}

func TestIsFlaky(t *testing.T) {
	tests := []struct {
		name   string
		prompt string
		want   bool
	}{
		{"first try", "(flaky) Using outline.md, write paper/draft.md", true},
		{"marker anywhere", "Write paper/draft.md (flaky)", true},
		{"retry", "Step draft failed (tries: 1). Previous run ended with: simulated failure: upstream timed out. Please troubleshoot and retry: (flaky) write paper/draft.md", false},
		{"no marker", "write paper/draft.md", false},
		{"marker without parentheses", "a flaky step: write x.md", false},
		{"step in lower case is not a retry", "step one (flaky): write x.md", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isFlaky(tt.prompt); got != tt.want {
				t.Errorf("isFlaky(%q) = %v, want %v", tt.prompt, got, tt.want)
			}
		})
	}
}

func TestRun(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantErr    string
		wantStdout string
		wantStderr string
		wantFiles  []string
		wantAbsent []string
	}{
		{
			name:       "writes inside the workspace",
			args:       []string{"-work", "0", "Research solar power and write study/summary.md, then write it to notes/a.txt"},
			wantStdout: "wrote study/summary.md\nwrote notes/a.txt\n",
			wantFiles:  []string{"study/summary.md", "notes/a.txt"},
		},
		{
			name:       "flaky first try fails without writing",
			args:       []string{"-work", "0", "(flaky) write paper/draft.md"},
			wantErr:    "simulated failure: upstream timed out",
			wantAbsent: []string{"paper/draft.md"},
		},
		{
			name:       "flaky retry succeeds",
			args:       []string{"-work", "0", "Step draft failed (tries: 1). Previous run ended with: x. Please troubleshoot and retry: (flaky) write paper/draft.md"},
			wantStdout: "wrote paper/draft.md\n",
			wantFiles:  []string{"paper/draft.md"},
		},
		{
			name:       "fail flag",
			args:       []string{"-work", "0", "-fail", "write x.md"},
			wantErr:    "simulated failure: -fail is set",
			wantAbsent: []string{"x.md"},
		},
		{
			name:       "refuses paths outside",
			args:       []string{"-work", "0", "write ../escape.md and write ok.md"},
			wantStdout: "wrote ok.md\n",
			wantStderr: "refused ../escape.md: not a relative path inside the workspace\n",
			wantFiles:  []string{"ok.md"},
			wantAbsent: []string{"../escape.md"},
		},
		{
			name:    "no prompt",
			args:    []string{"-work", "0"},
			wantErr: errUsage.Error(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			ws := filepath.Join(parent, "ws")
			if err := os.Mkdir(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Setenv("STEPSEQ_WORKSPACE", ws)
			t.Setenv("STEPSEQ_STEP", "research")
			t.Setenv("STEPSEQ_TRY", "2")

			var stdout, stderr bytes.Buffer
			err := run(tt.args, &stdout, &stderr)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("run: %v (stderr %q)", err, stderr.String())
			case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
				t.Fatalf("run error = %v, want %q", err, tt.wantErr)
			}
			if got := stdout.String(); got != tt.wantStdout {
				t.Errorf("stdout = %q, want %q", got, tt.wantStdout)
			}
			if got := stderr.String(); got != tt.wantStderr {
				t.Errorf("stderr = %q, want %q", got, tt.wantStderr)
			}
			for _, f := range tt.wantFiles {
				data, err := os.ReadFile(filepath.Join(ws, f))
				if err != nil {
					t.Errorf("output %s: %v", f, err)
					continue
				}
				if !strings.Contains(string(data), "research") {
					t.Errorf("output %s does not mention the step: %q", f, data)
				}
			}
			for _, f := range tt.wantAbsent {
				if _, err := os.Stat(filepath.Join(ws, f)); err == nil {
					t.Errorf("%s was written, want absent", f)
				}
			}
		})
	}
}

func TestRun_workspaceDefaultsToWorkingDirectory(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("STEPSEQ_WORKSPACE", "")
	t.Setenv("STEPSEQ_STEP", "")
	t.Setenv("STEPSEQ_TRY", "")

	var stdout, stderr bytes.Buffer
	if err := run([]string{"-work", "0", "write out.md"}, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "out.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "step manual (try 1)") {
		t.Errorf("out.md = %q, want it to name step manual, try 1", data)
	}
}
