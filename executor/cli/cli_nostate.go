package cli

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// says reports whether a message at level is shown under --log-level.
func (g *globals) says(level slog.Level) bool {
	var at slog.Level
	if err := at.UnmarshalText([]byte(g.logLevel)); err != nil {
		at = slog.LevelInfo
	}
	return level >= at
}

// noStateHint is check's and step's one line when the state file is missing:
// the original's "nothing to do", and what makes a state file. check never reads
// plans/, so a plan waiting there is named with the two ways it runs.
func noStateHint(state string) string {
	dir, name := filepath.Dir(state), filepath.Base(state)
	plans := filepath.Join(dir, "plans")
	apply := func(plan string) string {
		if name == "state.json" {
			return "stepseq apply " + plan + " " + dir
		}
		return "stepseq apply --state " + state + " " + plan
	}
	msg := "stepseq: no " + name + " in " + dir + ": nothing to do. "
	if found := planFiles(plans); len(found) > 0 {
		return msg + "check runs a state file, not the plans in " + plans + " (" + strings.Join(found, ", ") + "): " +
			apply(filepath.Join(plans, found[0])) + " makes " + name + " from one; stepseq watch " + dir + " runs them one after another"
	}
	return msg + "To start one: stepseq init " + dir + " writes an example plan in " + plans + ", then " +
		apply(filepath.Join(plans, "example.yaml")) + " makes " + name +
		" (or stepseq watch " + dir + " runs every plan dropped in " + plans + ")"
}

// planFiles are the YAML files in dir, by name; none when it cannot be read.
func planFiles(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() && !strings.HasPrefix(n, ".") && (strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
			out = append(out, n)
		}
	}
	return out
}
