package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadme_FirstHour holds the README to what a newcomer needs first: a quick
// start that works from a clone (the module is not published, so go install
// comes after, saying so), "your first plan" right after it, a first page that
// fits in a few screens (the reference lives in linked pages), and every link
// it and those pages make leading to a file that exists. The skill's front
// matter, in both its copies, says the same of go install.
func TestReadme_FirstHour(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	if len(readme) > 12<<10 {
		t.Errorf("README.md is %d bytes: move reference material to examples/docs/", len(readme))
	}
	clone, install := strings.Index(readme, "git clone"), strings.Index(readme, "go install")
	if clone < 0 || install < 0 || install < clone {
		t.Errorf("README.md must lead with a clone (at %d), go install after it (at %d)", clone, install)
	}
	if line := lineWith(readme, "go install github.com/stepseq/stepseq@latest"); !strings.Contains(line, "published") {
		t.Errorf("README.md's go install line does not say it waits for the module to be published: %q", line)
	}
	first := section(readme, "## Your first plan")
	if first == "" || strings.Index(readme, "## Your first plan") < strings.Index(readme, "## Quick start") {
		t.Fatal("README.md has no \"Your first plan\" after its quick start")
	}
	for _, want := range []string{"stepseq init", "#!/bin/sh", "chmod +x agent.sh", "STEP_AGENT_CMD=./agent.sh stepseq watch", "stepseq status -f", "state.*.json", "(examples/demo/README.md)"} {
		if !strings.Contains(first, want) {
			t.Errorf("\"Your first plan\" lacks %q", want)
		}
	}
	pages, _ := filepath.Glob("../../examples/docs/*.md")
	if len(pages) == 0 {
		t.Fatal("no reference pages under examples/docs/")
	}
	checkLinks(t, "../../README.md", readme)
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		checkLinks(t, p, string(b))
	}
	for _, p := range []string{"../../examples/SKILL.md", "../../examples/claude-plugin/skills/stepseq/SKILL.md"} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		front, _, _ := strings.Cut(strings.TrimPrefix(string(b), "---\n"), "\n---\n")
		if strings.Contains(front, "go install") && !strings.Contains(front, "published") {
			t.Errorf("%s: its front matter offers go install without saying the module must be published first", p)
		}
	}
}

var mdLink = regexp.MustCompile(`\]\(([^)#\s]*)(#[^)]*)?\)`)

// checkLinks fails on every relative link of the markdown file path that leads
// to no file.
func checkLinks(t *testing.T, path, text string) {
	t.Helper()
	for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
		target := m[1]
		if target == "" || strings.Contains(target, "://") {
			continue
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(path), target)); err != nil {
			t.Errorf("%s links to %s, which does not exist", path, target)
		}
	}
}

func lineWith(text, sub string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// section is the markdown section that starts with heading, to the next "## ".
func section(text, heading string) string {
	i := strings.Index(text, heading+"\n")
	if i < 0 {
		return ""
	}
	rest := text[i+len(heading):]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}
