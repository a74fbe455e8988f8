// Command presetcheck holds the agent presets to the real CLIs: it installs with
// npm, into a temporary prefix, each CLI the npm registry serves, and checks that
// every flag a preset passes (and every value it gives one) appears in that CLI's
// own --help. A preset that drifts from its CLI fails the check. A CLI whose
// package asks for a newer Node than this system's (openclaw's engines range) is
// installed and run with a Node from npm's own `node` package, installed into the
// same prefix. A CLI that cannot be installed or cannot run here is named and
// skipped: its preset stays tested by its fake. Run by `make presets-check`.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stepseq/stepseq/executor/internal/npmcli"
	"github.com/stepseq/stepseq/executor/proc"
)

// npmPackages are the presets whose CLI the npm registry serves.
var npmPackages = map[string]string{
	"claude":   "@anthropic-ai/claude-code",
	"codex":    "@openai/codex",
	"gemini":   "@google/gemini-cli",
	"opencode": "opencode-ai",
	"openclaw": "openclaw",
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "presets-check:", err)
		os.Exit(1)
	}
}

// result is what became of one preset.
type result struct {
	preset  string
	version string
	skipped string   // why the CLI was not checked
	missing []string // what its help lacks
	checked int
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("presetcheck", flag.ContinueOnError)
	keep := fs.String("dir", "", "install into this folder and keep it (default: a temporary folder, removed)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return errors.New("npm is not on PATH: install Node.js and npm")
	}
	dir := *keep
	if dir == "" {
		tmp, err := os.MkdirTemp("", "stepseq-presets-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	dir, _ = filepath.Abs(dir)

	presets := proc.Presets()
	results := make([]result, len(presets))
	var wg sync.WaitGroup
	for i, p := range presets {
		pkg, ok := npmPackages[p.Name]
		if !ok {
			results[i] = result{preset: p.Name, skipped: "not served by the npm registry"}
			continue
		}
		wg.Go(func() { results[i] = check(p, pkg, filepath.Join(dir, p.Name)) })
	}
	wg.Wait()

	failed := 0
	for _, r := range results {
		switch {
		case r.skipped != "":
			fmt.Fprintf(out, "SKIP %-9s %s; the preset stays tested by its fake\n", r.preset, r.skipped)
		case len(r.missing) > 0:
			failed++
			fmt.Fprintf(out, "FAIL %-9s %s: its --help lacks %s\n", r.preset, r.version, strings.Join(r.missing, ", "))
		default:
			fmt.Fprintf(out, "ok   %-9s %s: all %d words of the preset are in its --help\n", r.preset, r.version, r.checked)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d presets drifted from their CLI", failed)
	}
	return nil
}

// check installs pkg under prefix and compares preset p with its CLI's help.
func check(p proc.Preset, pkg, prefix string) result {
	r := result{preset: p.Name}
	if err := os.MkdirAll(filepath.Join(prefix, "home"), 0o755); err != nil {
		r.skipped = err.Error()
		return r
	}
	env, node, err := nodeEnv(prefix, pkg, os.Environ())
	if err != nil {
		r.skipped = err.Error()
		return r
	}
	if msg, err := npmcli.InstallEnv(prefix, pkg+"@latest", env); err != nil {
		r.skipped = fmt.Sprintf("cannot install %s: %v: %s", pkg, err, npmcli.LastLine(msg))
		return r
	}
	r.version = pkg + " " + version(prefix, pkg)
	if node != "" {
		r.version += " on " + node
	}
	bin := filepath.Join(prefix, "node_modules", ".bin", p.Argv[0])
	// A home of its own: a CLI may write its settings on first run.
	env = append(env, "HOME="+filepath.Join(prefix, "home"), "NO_COLOR=1", "CI=1")
	help, err := npmcli.Run(prefix, 2*time.Minute, env, bin, p.Help[1:]...)
	if err != nil {
		r.skipped = fmt.Sprintf("%s: cannot run %s: %v: %s", r.version, strings.Join(p.Help, " "), err, npmcli.LastLine(help))
		return r
	}
	r.missing, r.checked = compare(p, help)
	if p.Resume != nil {
		resumeHelp := ""
		if p.ResumeHelp != nil {
			if resumeHelp, err = npmcli.Run(prefix, 2*time.Minute, env, bin, p.ResumeHelp[1:]...); err != nil {
				r.missing = append(r.missing, fmt.Sprintf("(cannot run %s: %v)", strings.Join(p.ResumeHelp, " "), err))
				return r
			}
		}
		missing, checked := compareResume(p, help, resumeHelp)
		r.missing, r.checked = append(r.missing, missing...), r.checked+checked
	}
	return r
}

// compareResume lists the words of the preset's resume form that its help does
// not show: those before the subcommand ResumeHelp names against the CLI's help,
// the rest against ResumeHelp's (codex takes its sandbox flag only before
// `resume`). They are named "resume: WORD".
func compareResume(p proc.Preset, help, resumeHelp string) (missing []string, checked int) {
	sub := ""
	if n := len(p.ResumeHelp); n >= 2 {
		sub = p.ResumeHelp[n-2]
	}
	before, after := p.Resume[1:], []string(nil)
	if i := slices.Index(before, sub); sub != "" && i >= 0 {
		before, after = before[:i+1], before[i+1:] // the subcommand is in the help above it
	}
	for _, part := range []struct {
		words []string
		help  string
	}{{before, help}, {after, resumeHelp}} {
		for _, w := range part.words {
			if w == proc.SessionPlaceholder || w == proc.ArgsPlaceholder {
				continue
			}
			checked++
			if !inHelp(w, part.help) {
				missing = append(missing, "resume: "+w)
			}
		}
	}
	return missing, checked
}

// compare lists the words of the preset that help does not show: its subcommands,
// its flags, the values it gives them, and its prompt flag.
func compare(p proc.Preset, help string) (missing []string, checked int) {
	words := slices.Clone(p.Argv[1:])
	if p.PromptFlag != "" {
		words = append(words, p.PromptFlag)
	}
	for _, w := range words {
		checked++
		if !inHelp(w, help) {
			missing = append(missing, w)
		}
	}
	return missing, checked
}

// inHelp reports whether help shows the word: a flag as a flag, a subcommand or
// a flag's value as a whole word.
func inHelp(w, help string) bool {
	var re *regexp.Regexp
	if strings.HasPrefix(w, "-") {
		re = regexp.MustCompile(`(^|[\s,\[(|])` + regexp.QuoteMeta(w) + `($|[\s,=\])|<])`)
	} else {
		// A subcommand or a flag's value: a whole word, often quoted as a choice.
		re = regexp.MustCompile(`(^|[^\w-])` + regexp.QuoteMeta(w) + `($|[^\w-])`)
	}
	return re.MatchString(help)
}

func version(prefix, pkg string) string {
	b, err := os.ReadFile(filepath.Join(prefix, "node_modules", pkg, "package.json"))
	if err != nil {
		return "?"
	}
	var m struct {
		Version string `json:"version"`
	}
	if json.Unmarshal(b, &m) != nil || m.Version == "" {
		return "?"
	}
	return m.Version
}
