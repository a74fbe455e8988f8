package main

import (
	"slices"
	"testing"

	"github.com/stepseq/stepseq/executor/proc"
)

// TestNpmPackages: every preset whose CLI the npm registry serves is checked
// against it, openclaw among them (it needs a newer Node than many systems
// have, which the check installs from npm).
func TestNpmPackages(t *testing.T) {
	for _, name := range []string{"claude", "codex", "gemini", "opencode", "openclaw"} {
		if _, ok := proc.LookupPreset(name); !ok {
			t.Errorf("no preset %s", name)
		}
		if npmPackages[name] == "" {
			t.Errorf("preset %s: its CLI is on the npm registry, but presets-check does not install it", name)
		}
	}
	if got := npmPackages["openclaw"]; got != "openclaw" {
		t.Errorf("openclaw's package %q, want openclaw", got)
	}
}

// TestNeedsNode: a Node is installed from npm when the system's does not meet
// the package's engines range (openclaw's own, and the common forms), when
// there is no Node, and when the range cannot be read.
func TestNeedsNode(t *testing.T) {
	const openclaw = ">=24.16.0 <25 || >=26.1.0"
	for _, tc := range []struct {
		system, want string
		needs        bool
	}{
		{"v20.20.2", openclaw, true},
		{"v24.15.9", openclaw, true},
		{"v24.16.0", openclaw, false},
		{"v24.99.0", openclaw, false},
		{"v25.0.0", openclaw, true},
		{"v26.0.5", openclaw, true},
		{"v26.1.0", openclaw, false},
		{"v26.10.0", openclaw, false},
		{"v20.20.2", "", false},
		{"v20.20.2", ">=18.0.0", false},
		{"v20.20.2", ">= 18", false},
		{"v20.20.2", ">=22", true},
		{"v20.20.2", "^20.19.0 || >=22.12.0", false},
		{"v20.18.0", "^20.19.0 || >=22.12.0", true},
		{"v21.0.0", "^20.19.0 || >=22.12.0", true},
		{"v20.20.2", "~20.20.0", false},
		{"v20.21.0", "~20.20.0", true},
		{"v20.20.2", "20.x", false},
		{"v20.20.2", "20", false},
		{"v20.20.2", "*", false},
		{"v20.20.2", ">20", true},
		{"v20.20.2", "<=20", false},
		{"v20.20.2", "<20.20.2", true},
		{"v20.20.2", "18 - 22", true}, // a hyphen range is not read: npm installs a Node for it
		{"", ">=18", true},            // no node on PATH
	} {
		if got := needsNode(tc.system, tc.want); got != tc.needs {
			t.Errorf("needsNode(%q, %q) = %v, want %v", tc.system, tc.want, got, tc.needs)
		}
	}
}

// TestWithPath: the installed Node's folder comes first on PATH, and the rest
// of the environment stays.
func TestWithPath(t *testing.T) {
	got := withPath([]string{"HOME=/h", "PATH=/usr/bin:/bin", "CI=1"}, "/p/node_modules/.bin")
	if want := []string{"HOME=/h", "CI=1", "PATH=/p/node_modules/.bin:/usr/bin:/bin"}; !slices.Equal(got, want) {
		t.Errorf("withPath = %q, want %q", got, want)
	}
	if got := withPath([]string{"HOME=/h"}, "/p"); !slices.Equal(got, []string{"HOME=/h", "PATH=/p"}) {
		t.Errorf("withPath without PATH = %q", got)
	}
}
