// Package npmcli installs command-line programs from the npm registry into a
// folder of their own and runs them, for the checks that hold stepseq to real
// agent CLIs (presetcheck, plugincheck).
package npmcli

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"time"
)

// Install installs spec (a package at a version, pkg@version: a bare name could be
// read as a folder of the working directory) under prefix, and returns npm's
// output.
func Install(prefix, spec string) (string, error) {
	return InstallEnv(prefix, spec, nil)
}

// InstallEnv is Install in the environment env (nil: this process's), which
// the package's install scripts run in: a PATH whose first node is the one
// the package needs.
func InstallEnv(prefix, spec string, env []string) (string, error) {
	return Run(prefix, 10*time.Minute, env, "npm", "install", "--prefix", prefix, "--no-audit", "--no-fund", "--loglevel=error", spec)
}

// Run runs name with args in dir, stdin from /dev/null, and returns its output,
// stdout and stderr as they came. env nil is this process's environment.
func Run(dir string, timeout time.Duration, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	return b.String(), err
}

// LastLine is the last non-empty line of s, trimmed: what a failing command said
// last.
func LastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
