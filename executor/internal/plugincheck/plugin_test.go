package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/stepseq/stepseq/executor/cli"
)

// The repository's files, from this folder.
var (
	rootDir     = filepath.Join("..", "..", "..")
	plugin      = filepath.Join(rootDir, filepath.FromSlash(pluginDir))
	skillCopy   = filepath.Join(rootDir, "examples", "SKILL.md")
	pluginSkill = filepath.Join(plugin, "skills", "stepseq", "SKILL.md")
)

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSkill_OneText: the skill is written once. examples/SKILL.md (OpenClaw's, and
// any agent's) and the plugin's skills/stepseq/SKILL.md are the same bytes.
func TestSkill_OneText(t *testing.T) {
	a, b := read(t, skillCopy), read(t, pluginSkill)
	if bytes.Equal(a, b) {
		return
	}
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	line := 0
	for line < min(len(la), len(lb)) && la[line] == lb[line] {
		line++
	}
	t.Fatalf("examples/SKILL.md and examples/claude-plugin/skills/stepseq/SKILL.md differ from line %d: the skill is one text; copy the one you edited over the other", line+1)
}

// frontMatter is the skill's YAML front matter and the lines it is written in.
func frontMatter(t *testing.T, text string) (map[string]any, []string) {
	t.Helper()
	rest, ok := strings.CutPrefix(text, "---\n")
	if !ok {
		t.Fatal("SKILL.md does not start with front matter (---)")
	}
	head, _, ok := strings.Cut(rest, "\n---\n")
	if !ok {
		t.Fatal("SKILL.md's front matter has no closing ---")
	}
	var fm map[string]any
	if err := yaml.Unmarshal([]byte(head), &fm); err != nil {
		t.Fatalf("front matter: %v", err)
	}
	return fm, strings.Split(head, "\n")
}

// modulePath is go.mod's module path.
func modulePath(t *testing.T) string {
	t.Helper()
	for line := range strings.SplitSeq(string(read(t, filepath.Join(rootDir, "go.mod"))), "\n") {
		if p, ok := strings.CutPrefix(line, "module "); ok {
			return strings.TrimSpace(p)
		}
	}
	t.Fatal("go.mod names no module")
	return ""
}

// TestSkill_FrontMatter: the front matter Claude Code and OpenClaw read. Every key
// on one line (OpenClaw's fallback parser reads no other), metadata one line of
// JSON; name and description as the AgentSkills format bounds them; OpenClaw told
// the binary it requires and how to install it: go install of this module.
func TestSkill_FrontMatter(t *testing.T) {
	fm, lines := frontMatter(t, string(read(t, pluginSkill)))
	for _, l := range lines {
		if l == "" || strings.HasPrefix(l, " ") || !strings.Contains(l, ": ") {
			t.Errorf("front matter line %q: want one key: value a line", l)
		}
	}
	if fm["name"] != "stepseq" || filepath.Base(filepath.Dir(pluginSkill)) != "stepseq" {
		t.Errorf("name %v: want stepseq, the skill's folder name", fm["name"])
	}
	desc, _ := fm["description"].(string)
	if desc == "" || len(desc) > 1024 {
		t.Errorf("description of %d characters: want 1 to 1024", len(desc))
	}
	var metaLine string
	for _, l := range lines {
		if m, ok := strings.CutPrefix(l, "metadata: "); ok {
			metaLine = m
		}
	}
	var meta struct {
		OpenClaw struct {
			Requires struct {
				Bins []string `json:"bins"`
			} `json:"requires"`
			Install []struct {
				ID, Kind, Module, Label string
				Bins                    []string
			} `json:"install"`
		} `json:"openclaw"`
	}
	if err := json.Unmarshal([]byte(metaLine), &meta); err != nil {
		t.Fatalf("metadata is not one line of JSON: %v", err)
	}
	if got := meta.OpenClaw.Requires.Bins; !reflect.DeepEqual(got, []string{"stepseq"}) {
		t.Errorf("metadata.openclaw.requires.bins %v, want [stepseq]", got)
	}
	want := modulePath(t) + "@latest"
	found := false
	for _, in := range meta.OpenClaw.Install {
		if in.Kind == "go" {
			found = true
			if in.Module != want || !reflect.DeepEqual(in.Bins, []string{"stepseq"}) || in.ID == "" || in.Label == "" {
				t.Errorf("the go installer %+v: want module %s, bins [stepseq], an id and a label", in, want)
			}
		}
	}
	if !found {
		t.Error("metadata.openclaw.install has no go installer")
	}
}

// TestSkill_Rules: the seed's working rules are in the skill, written for stepseq.
func TestSkill_Rules(t *testing.T) {
	text := string(read(t, pluginSkill))
	for _, want := range []string{
		"three or more actions", "sequence words", "needs what another produces", "large or risky", "the user asks",
		"wait for the answer", "2-minute delay", "stepDelay: 2m",
		"Persist the plan", "Run `stepseq check` at once",
		"retry it once", "alternative way", "exit non-zero",
		"Finish with the deliverables", "artifacts",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the skill does not say %q", want)
		}
	}
}

// TestManifests: the marketplace lists the plugin where it is; the plugin's
// manifest agrees with its entry; the license both name is the repository's; the
// plugin registers the server `stepseq init --claude` registers.
func TestManifests(t *testing.T) {
	type entry struct {
		Name, Source, Description, Version, License string
	}
	var market struct {
		Name    string
		Owner   struct{ Name string }
		Plugins []entry
	}
	if err := json.Unmarshal(read(t, filepath.Join(rootDir, ".claude-plugin", "marketplace.json")), &market); err != nil {
		t.Fatalf("marketplace.json: %v", err)
	}
	if market.Name != "stepseq" || market.Owner.Name == "" || len(market.Plugins) != 1 {
		t.Fatalf("marketplace %q owned by %q with %d plugins: want stepseq, an owner, one plugin", market.Name, market.Owner.Name, len(market.Plugins))
	}
	e := market.Plugins[0]
	if e.Source != "./"+pluginDir {
		t.Errorf("the plugin's source is %q, want ./%s", e.Source, pluginDir)
	}
	var man entry
	if err := json.Unmarshal(read(t, filepath.Join(rootDir, filepath.FromSlash(e.Source), ".claude-plugin", "plugin.json")), &man); err != nil {
		t.Fatalf("plugin.json: %v", err)
	}
	if man.Name != e.Name || man.Version != e.Version || man.License != e.License || man.Version == "" {
		t.Errorf("plugin.json says %s %s (%s), the marketplace %s %s (%s): want the same name, version and license",
			man.Name, man.Version, man.License, e.Name, e.Version, e.License)
	}
	if lic := read(t, filepath.Join(rootDir, "LICENSE")); man.License != "MIT" || !bytes.HasPrefix(lic, []byte("MIT License\n")) {
		t.Errorf("plugin.json's license %q and LICENSE (%q…) do not agree on MIT", man.License, lic[:min(len(lic), 20)])
	}

	var mcp struct {
		Servers map[string]cli.MCPServer `json:"mcpServers"`
	}
	dec := json.NewDecoder(bytes.NewReader(read(t, filepath.Join(plugin, ".mcp.json"))))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&mcp); err != nil {
		t.Fatalf(".mcp.json: %v", err)
	}
	if want := map[string]cli.MCPServer{cli.ClaudeServerName: cli.ClaudeServer}; !reflect.DeepEqual(mcp.Servers, want) {
		t.Errorf("the plugin registers %+v, init --claude %+v: want the same", mcp.Servers, want)
	}
}

// TestNativePackage: the CLI's package for each system the npm registry serves.
func TestNativePackage(t *testing.T) {
	for _, tc := range []struct{ goos, goarch, want string }{
		{"linux", "amd64", "@anthropic-ai/claude-code-linux-x64"},
		{"linux", "arm64", "@anthropic-ai/claude-code-linux-arm64"},
		{"darwin", "arm64", "@anthropic-ai/claude-code-darwin-arm64"},
		{"darwin", "amd64", "@anthropic-ai/claude-code-darwin-x64"},
		{"freebsd", "amd64", ""},
	} {
		got, err := nativePackage(tc.goos, tc.goarch)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("nativePackage(%s, %s) = %q, %v; want %q", tc.goos, tc.goarch, got, err, tc.want)
		}
	}
}
