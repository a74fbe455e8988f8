// Command plugincheck holds the repository's Claude Code marketplace and plugin to
// the real Claude Code CLI, the native binary the npm registry serves
// (@anthropic-ai/claude-code-<os>-<arch>), which runs offline. It installs that
// package once, at a pinned version, into the user's cache folder, and with a home
// folder of its own for the CLI:
//
//  1. runs `claude plugin validate --strict` on the marketplace (the repository)
//     and on the plugin (examples/claude-plugin): both must pass with nothing to
//     report: no warning of the plugin directory's checks (a missing icon) and
//     no part whose hosts are not declared, which the CLI prints and still
//     passes;
//  2. installs the plugin as a user does, with the two commands the README gives
//     (`claude plugin marketplace add`, `claude plugin install stepseq@stepseq`),
//     and asks `claude mcp list`, in a fresh project, whether the plugin's
//     `stepseq mcp` connects;
//  3. runs `stepseq init --claude` in another fresh project and asks
//     `claude mcp list` there whether the project's server connects.
//
// Run by `make plugin-check`, which builds the stepseq it puts on PATH. The
// static half, run by go test, is plugin_test.go: the skill written once, the
// manifests that agree, the front matter OpenClaw reads.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/stepseq/stepseq/executor/internal/npmcli"
)

// claudeCodeVersion is the Claude Code release the checks run: pinned, so that a
// new release changes nothing here until this line does.
const claudeCodeVersion = "2.1.333"

// pluginDir is the plugin's folder in the repository; marketplace.json names it.
const pluginDir = "examples/claude-plugin"

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "plugin-check:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("plugincheck", flag.ContinueOnError)
	stepseq := fs.String("stepseq", "bin/stepseq", "the stepseq binary to put on PATH")
	cache := fs.String("cache", "", "where the CLI is installed and kept (default: the user's cache folder, stepseq/claude-code)")
	version := fs.String("version", claudeCodeVersion, "the Claude Code release to check with")
	if err := fs.Parse(args); err != nil {
		return err
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	bin, err := filepath.Abs(*stepseq)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%w: build it first (make build)", err)
	}
	if *cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return fmt.Errorf("no cache folder (%w): give -cache", err)
		}
		*cache = filepath.Join(dir, "stepseq", "claude-code")
	}
	pkg, err := nativePackage(runtime.GOOS, runtime.GOARCH)
	if err != nil {
		return err
	}
	claude, err := install(*cache, pkg, *version, out)
	if err != nil {
		return err
	}

	tmp, err := os.MkdirTemp("", "stepseq-plugin-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	home := filepath.Join(tmp, "home")
	// The project's server is approved as a person approves it the first time.
	if err := writeFile(filepath.Join(home, ".claude", "settings.json"), `{"enabledMcpjsonServers": ["stepseq"]}`+"\n"); err != nil {
		return err
	}
	c := claudeCLI{bin: claude, env: append(os.Environ(),
		"HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"NO_COLOR=1", "DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")}

	failed := 0
	check := func(what string, fn func() (string, error)) {
		start := time.Now()
		detail, err := fn()
		if err != nil {
			failed++
			fmt.Fprintf(out, "FAIL %s: %v\n", what, err)
			return
		}
		fmt.Fprintf(out, "ok   %s (%.1fs)%s\n", what, time.Since(start).Seconds(), detail)
	}
	check("claude plugin validate --strict . (the marketplace)", func() (string, error) {
		return "", c.validate(root, root)
	})
	check("claude plugin validate --strict "+pluginDir+" (the plugin)", func() (string, error) {
		return "", c.validate(root, filepath.Join(root, pluginDir))
	})
	check("the plugin installs with two commands and its stepseq mcp connects", func() (string, error) {
		if err := c.run(root, "plugin", "marketplace", "add", root); err != nil {
			return "", err
		}
		if err := c.run(root, "plugin", "install", "stepseq@stepseq"); err != nil {
			return "", err
		}
		return c.connected(filepath.Join(tmp, "project"), `plugin:stepseq:stepseq: stepseq mcp - .*Connected`)
	})
	check("stepseq init --claude registers a server that connects", func() (string, error) {
		proj := filepath.Join(tmp, "initproject")
		if err := os.MkdirAll(proj, 0o755); err != nil {
			return "", err
		}
		if msg, err := npmcli.Run(proj, time.Minute, c.env, bin, "init", "--claude", proj); err != nil {
			return "", fmt.Errorf("stepseq init --claude: %w: %s", err, msg)
		}
		return c.connected(proj, `(?m)^stepseq: stepseq mcp - .*Connected`)
	})
	if failed > 0 {
		return fmt.Errorf("%d of 4 checks failed", failed)
	}
	return nil
}

// nativePackage is the npm package of Claude Code's native binary for a system.
func nativePackage(goos, goarch string) (string, error) {
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[goarch]
	if (goos != "linux" && goos != "darwin") || arch == "" {
		return "", fmt.Errorf("the npm registry serves Claude Code's binary for linux and darwin on amd64 and arm64, not %s/%s", goos, goarch)
	}
	return "@anthropic-ai/claude-code-" + goos + "-" + arch, nil
}

// install returns the CLI of pkg@version under cache, installing it once: into a
// folder beside its place, renamed there when whole, so an interrupted install is
// never taken for one.
func install(cache, pkg, version string, out io.Writer) (string, error) {
	dir := filepath.Join(cache, strings.ReplaceAll(strings.TrimPrefix(pkg, "@"), "/", "-")+"@"+version)
	claude := filepath.Join(dir, "node_modules", filepath.FromSlash(pkg), "claude")
	if msg, err := npmcli.Run(cache, time.Minute, nil, claude, "--version"); err == nil {
		fmt.Fprintf(out, "claude %s (cached in %s)\n", strings.TrimSpace(msg), dir)
		return claude, nil
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "", errors.New("npm is not on PATH: install Node.js and npm")
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(cache, ".install-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	fmt.Fprintf(out, "installing %s@%s from the npm registry into %s (once)\n", pkg, version, dir)
	if msg, err := npmcli.Install(tmp, pkg+"@"+version); err != nil {
		return "", fmt.Errorf("npm install %s@%s: %w: %s", pkg, version, err, npmcli.LastLine(msg))
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	msg, err := npmcli.Run(cache, time.Minute, nil, claude, "--version")
	if err != nil {
		return "", fmt.Errorf("%s --version: %w: %s", claude, err, npmcli.LastLine(msg))
	}
	fmt.Fprintf(out, "claude %s\n", strings.TrimSpace(msg))
	return claude, nil
}

// claudeCLI runs the Claude Code CLI with a home of its own.
type claudeCLI struct {
	bin string
	env []string
}

// run runs the CLI in dir; its whole output is the error when it fails.
func (c claudeCLI) run(dir string, args ...string) error {
	msg, err := npmcli.Run(dir, 2*time.Minute, c.env, c.bin, args...)
	if err != nil {
		return fmt.Errorf("claude %s: %w\n%s", strings.Join(args, " "), err, indent(msg))
	}
	return nil
}

// validate runs `claude plugin validate --strict target` in dir: it must pass
// and report nothing (strictNotes).
func (c claudeCLI) validate(dir, target string) error {
	args := []string{"plugin", "validate", "--strict", target}
	msg, err := npmcli.Run(dir, 2*time.Minute, c.env, c.bin, args...)
	if err != nil {
		return fmt.Errorf("claude %s: %w\n%s", strings.Join(args, " "), err, indent(msg))
	}
	if notes := strictNotes(msg); len(notes) > 0 {
		return fmt.Errorf("claude %s passes but reports:\n%s", strings.Join(args, " "), indent(strings.Join(notes, "\n")))
	}
	return nil
}

// findingCode is the code the plugin directory's checks give a finding, as in
// "icon: No icon (ICON_MISSING)".
var findingCode = regexp.MustCompile(`\([A-Z]+(?:_[A-Z]+)+\)`)

// strictNotes are the lines of validate's output that report something while
// it passes: a warning's heading (⚠), a finding of the plugin directory's
// checks, and the parts whose hosts the manifest does not declare. "Hosts not
// read for" is not one: it says which parts the CLI cannot read hosts from,
// whatever the manifest declares.
func strictNotes(out string) []string {
	var notes []string
	for line := range strings.Lines(out) {
		l := strings.TrimSpace(line)
		if strings.HasPrefix(l, "⚠") || findingCode.MatchString(l) || strings.HasPrefix(l, "Hosts not declared") {
			notes = append(notes, l)
		}
	}
	return notes
}

// connected runs `claude mcp list` in the project folder dir and wants a line
// matching pattern: the server started and answered.
func (c claudeCLI) connected(dir, pattern string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	msg, err := npmcli.Run(dir, 2*time.Minute, c.env, c.bin, "mcp", "list")
	if err != nil {
		return "", fmt.Errorf("claude mcp list: %w\n%s", err, indent(msg))
	}
	line := regexp.MustCompile(pattern).FindString(msg)
	if line == "" {
		return "", fmt.Errorf("claude mcp list shows no line like %q:\n%s", pattern, indent(msg))
	}
	return ": " + line, nil
}

// repoRoot is the folder holding go.mod, from the working directory up.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, ".claude-plugin", "marketplace.json")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no .claude-plugin/marketplace.json here or above: run it in the repository")
		}
		dir = parent
	}
}

func writeFile(path, data string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(data), 0o644)
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}
