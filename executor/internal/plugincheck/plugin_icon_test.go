package main

import (
	"encoding/json"
	"image"
	_ "image/jpeg" // an icon may be a JPEG
	_ "image/png"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestPlugin_IconAndHosts: plugin.json names its icon, a file in the plugin
// that the plugin directory takes (a square PNG or JPEG, 512 to 2048 px a
// side, under 2 MB), and declares the network hosts its parts reach, each
// in the sandbox's allowedDomains syntax (none: stepseq mcp speaks over
// stdio and reaches no host).
func TestPlugin_IconAndHosts(t *testing.T) {
	var man struct {
		Icon    string `json:"icon"`
		Network *struct {
			Hosts *[]string `json:"hosts"`
		} `json:"network"`
	}
	if err := json.Unmarshal(read(t, filepath.Join(plugin, ".claude-plugin", "plugin.json")), &man); err != nil {
		t.Fatalf("plugin.json: %v", err)
	}
	switch rel := filepath.FromSlash(man.Icon); {
	case man.Icon == "":
		t.Error("plugin.json names no icon")
	case !strings.HasPrefix(man.Icon, "./") || filepath.IsAbs(rel) || !filepath.IsLocal(rel):
		t.Errorf("plugin.json's icon %q: want a path in the plugin, starting ./", man.Icon)
	default:
		checkIcon(t, filepath.Join(plugin, rel))
	}
	if man.Network == nil || man.Network.Hosts == nil {
		t.Fatal(`plugin.json declares no network hosts: want "network": {"hosts": [...]}, [] for none`)
	}
	host := regexp.MustCompile(`^(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*(:[0-9]{1,5})?$`)
	for _, h := range *man.Network.Hosts {
		if !host.MatchString(h) {
			t.Errorf("network host %q: want a host as sandbox.network.allowedDomains takes it (api.example.com, *.example.com, host:port)", h)
		}
	}
}

// checkIcon holds the icon at path to what the plugin directory takes.
func checkIcon(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("the icon plugin.json names: %v", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() >= 2<<20 {
		t.Errorf("the icon is %d bytes: want under 2 MB", fi.Size())
	}
	cfg, format, err := image.DecodeConfig(f)
	if err != nil {
		t.Fatalf("the icon %s is not a PNG or JPEG: %v", path, err)
	}
	if !slices.Contains([]string{"png", "jpeg"}, format) || cfg.Width != cfg.Height || cfg.Width < 512 || cfg.Width > 2048 {
		t.Errorf("the icon is a %dx%d %s: want a square PNG or JPEG, 512 to 2048 px a side", cfg.Width, cfg.Height, format)
	}
}

// TestStrictNotes: what `claude plugin validate --strict` (2.1.333) reports
// while it passes fails the check; its plain pass, and the parts it cannot
// read hosts from, do not.
func TestStrictNotes(t *testing.T) {
	const warned = `Validating plugin manifest: /repo/examples/claude-plugin/.claude-plugin/plugin.json

Provides:

  ❯ mcpServers: stepseq stdio stepseq ["mcp"]
  ❯ skills: stepseq:stepseq

Hosts not read for: mcpServers (1), skills (1)
Hosts not declared: list what these parts reach under "network.hosts" in plugin.json

Plugin directory checks for /repo/examples/claude-plugin. The plugin directory is the catalog that plugins are submitted to; this is a subset of what it runs.

⚠ Found 1 plugin directory warning:

  ❯ .claude-plugin/plugin.json icon: No icon (ICON_MISSING). No icon found in the plugin.
    Fix: Add a square PNG to the plugin folder at .claude-plugin/icon.png, or set ` + "`icon`" + ` in plugin.json.

These plugin directory checks do not change the result below.

✔ Validation passed
`
	const clean = `Validating plugin manifest: /repo/examples/claude-plugin/.claude-plugin/plugin.json

Provides:

  ❯ mcpServers: stepseq stdio stepseq ["mcp"]
  ❯ skills: stepseq:stepseq

Hosts not read for: mcpServers (1), skills (1)

Plugin directory checks for /repo/examples/claude-plugin. The plugin directory is the catalog that plugins are submitted to; this is a subset of what it runs.

✔ These checks found nothing to report

The directory also runs a safety scan and a policy review that this command does not.

✔ Validation passed
`
	want := []string{
		`Hosts not declared: list what these parts reach under "network.hosts" in plugin.json`,
		"⚠ Found 1 plugin directory warning:",
		"❯ .claude-plugin/plugin.json icon: No icon (ICON_MISSING). No icon found in the plugin.",
	}
	if got := strictNotes(warned); !slices.Equal(got, want) {
		t.Errorf("strictNotes of a pass with warnings:\n%q\nwant\n%q", got, want)
	}
	if got := strictNotes(clean); len(got) > 0 {
		t.Errorf("strictNotes of a clean pass: %q, want none", got)
	}
}
