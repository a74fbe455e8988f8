package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/stepseq/stepseq/executor/internal/npmcli"
)

// nodeEnv is the environment a CLI from the npm registry installs and runs
// in: env as it is when this system's Node satisfies the package's engines
// range, else env with a Node from npm's own `node` package, installed under
// prefix (never globally), first on PATH. A CLI's `#!/usr/bin/env node` and
// its install scripts then run on that Node. used says which Node, for the
// report; empty for the system's.
func nodeEnv(prefix, pkg string, env []string) (out []string, used string, err error) {
	msg, err := npmcli.Run(prefix, 2*time.Minute, env, "npm", "view", pkg+"@latest", "engines.node")
	if err != nil {
		return nil, "", fmt.Errorf("npm view %s engines.node: %w: %s", pkg, err, npmcli.LastLine(msg))
	}
	want := strings.TrimSpace(msg)
	system, _ := npmcli.Run(prefix, time.Minute, env, "node", "--version")
	if !needsNode(strings.TrimSpace(system), want) {
		return env, "", nil
	}
	if msg, err := npmcli.Install(prefix, "node@"+want); err != nil {
		return nil, "", fmt.Errorf("%s needs Node %s (this system's: %s): npm install node@%s: %w: %s",
			pkg, want, strings.TrimSpace(system), want, err, npmcli.LastLine(msg))
	}
	bin := filepath.Join(prefix, "node_modules", ".bin")
	out = withPath(env, bin)
	v, err := npmcli.Run(prefix, time.Minute, out, filepath.Join(bin, "node"), "--version")
	if err != nil {
		return nil, "", fmt.Errorf("the Node npm installed for %s: %w: %s", pkg, err, npmcli.LastLine(v))
	}
	return out, fmt.Sprintf("Node %s from npm's node package, for %s", strings.TrimPrefix(strings.TrimSpace(v), "v"), want), nil
}

// withPath is env with dir first on PATH.
func withPath(env []string, dir string) []string {
	out := make([]string, 0, len(env)+1)
	path := dir
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = dir + string(os.PathListSeparator) + p
			continue
		}
		out = append(out, kv)
	}
	return append(out, "PATH="+path)
}

// needsNode reports whether a Node must be installed for a package whose
// engines range is want, where the system's `node --version` says system
// ("" when there is none). A range it cannot read is taken as unmet: npm
// reads it when it installs the Node.
func needsNode(system, want string) bool {
	if want == "" {
		return false
	}
	v, ok := parseVersion(strings.TrimPrefix(system, "v"))
	if !ok || v.partial {
		return true
	}
	sat, ok := satisfies(v.v, want)
	return !ok || !sat
}

// satisfies reports whether version v is in the semver range r, as npm reads
// the ranges packages give engines.node: alternatives joined by ||, each a
// list of comparators (>=, >, <=, <, =, ^, ~, a bare or partial version, *
// or x). ok is false for a range it does not read (a hyphen range).
func satisfies(v [3]int, r string) (sat, ok bool) {
	for _, alt := range strings.Split(r, "||") {
		if strings.Contains(alt, " - ") {
			return false, false
		}
		all, known := true, true
		for _, c := range comparators(alt) {
			in, k := compares(v, c)
			all, known = all && in, known && k
		}
		if !known {
			return false, false
		}
		if all {
			return true, true
		}
	}
	return false, true
}

// comparators splits one alternative of a range into its comparators, an
// operator kept with its version (">= 24" is ">=24").
func comparators(alt string) []string {
	var out []string
	pending := ""
	for _, f := range strings.Fields(alt) {
		if strings.Trim(f, "<>=^~") == "" {
			pending += f
			continue
		}
		out = append(out, pending+f)
		pending = ""
	}
	return out
}

type semver struct {
	v       [3]int
	parts   int  // how many of major, minor, patch were given
	partial bool // fewer than three, or an x
}

// parseVersion reads 24, 24.16, 24.16.0, 24.x or * (a prerelease or build
// suffix is dropped).
func parseVersion(s string) (semver, bool) {
	s, _, _ = strings.Cut(s, "+")
	s, _, _ = strings.Cut(s, "-")
	var out semver
	if s == "" || s == "*" || s == "x" || s == "X" {
		out.partial = true
		return out, true
	}
	for i, p := range strings.Split(s, ".") {
		if i > 2 {
			return out, false
		}
		if p == "x" || p == "X" || p == "*" {
			out.partial = true
			break
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, false
		}
		out.v[i], out.parts = n, i+1
	}
	out.partial = out.partial || out.parts < 3
	return out, true
}

// compares reports whether v meets comparator c.
func compares(v [3]int, c string) (in, ok bool) {
	rest := strings.TrimLeft(c, "<>=^~")
	op := c[:len(c)-len(rest)]
	w, ok := parseVersion(strings.TrimPrefix(rest, "v"))
	if !ok {
		return false, false
	}
	lo, hi := w.v, upper(w) // [lo, hi): the versions w stands for
	switch op {
	case "", "=":
		return cmp(v, lo) >= 0 && (w.parts == 0 || cmp(v, hi) < 0), true
	case ">=":
		return cmp(v, lo) >= 0, true
	case ">":
		if w.parts == 0 {
			return false, true
		}
		return cmp(v, hi) >= 0, true
	case "<":
		return cmp(v, lo) < 0, true
	case "<=":
		return w.parts == 0 || cmp(v, hi) < 0, true
	case "^":
		return w.parts == 0 || cmp(v, lo) >= 0 && cmp(v, caret(w)) < 0, true
	case "~":
		return w.parts == 0 || cmp(v, lo) >= 0 && cmp(v, tilde(w)) < 0, true
	}
	return false, false
}

// upper is the first version past what w stands for: 24 → 25.0.0, 24.16 →
// 24.17.0, 24.16.0 → 24.16.1.
func upper(w semver) [3]int {
	switch w.parts {
	case 0:
		return [3]int{}
	case 1:
		return [3]int{w.v[0] + 1, 0, 0}
	case 2:
		return [3]int{w.v[0], w.v[1] + 1, 0}
	}
	return [3]int{w.v[0], w.v[1], w.v[2] + 1}
}

// caret is where ^w ends: at the next change of its first non-zero part.
func caret(w semver) [3]int {
	switch {
	case w.v[0] > 0 || w.parts == 1:
		return [3]int{w.v[0] + 1, 0, 0}
	case w.v[1] > 0 || w.parts == 2:
		return [3]int{0, w.v[1] + 1, 0}
	}
	return [3]int{0, 0, w.v[2] + 1}
}

// tilde is where ~w ends: the next minor, or the next major when only the
// major is given.
func tilde(w semver) [3]int {
	if w.parts == 1 {
		return [3]int{w.v[0] + 1, 0, 0}
	}
	return [3]int{w.v[0], w.v[1] + 1, 0}
}

func cmp(a, b [3]int) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}
