// Command demoagent is a harmless stand-in for an AI agent, used by the stepseq
// demo and by tests that need an agent which writes files, takes a moment and
// sometimes fails.
//
// stepseq runs it as
//
//	demoagent [-work 300ms] [-fail] PROMPT
//
// with the prompt as the last argument, the workspace as its working directory
// and STEPSEQ_STEP, STEPSEQ_TRY, STEPSEQ_WORKSPACE and STEPSEQ_STATE set. Run by
// hand without STEPSEQ_WORKSPACE, the workspace is the working directory.
//
// Rules, in order:
//
//  1. With -fail it prints "simulated failure: -fail is set" to stderr and exits 1.
//  2. If the prompt contains the marker "(flaky)" and does not start with "Step "
//     (stepseq's troubleshoot prompt on a retry starts "Step <id> failed"), it
//     prints "simulated failure: upstream timed out" to stderr and exits 1. So a
//     flaky step fails its first try and succeeds on the retry.
//  3. Otherwise it writes every file the prompt asks for (see outputPaths), prints
//     "wrote PATH" for each, and exits 0.
//
// It sleeps for -work before deciding, to look like work. It never writes
// outside the workspace: absolute paths and paths with ".." are refused, and
// writes go through os.Root, so a symlink cannot lead out either.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// flakyMarker in an instruction makes the first try of its step fail.
const flakyMarker = "(flaky)"

// retryPrefix starts the troubleshoot prompt stepseq sends on a retry.
const retryPrefix = "Step "

// writeRE finds the files a prompt asks for: the word "write" or "writes",
// then either the path at once ("write paper/draft.md") or a few words and
// "to" before it ("write a short summary to study/summary.md"). A path is
// letters, digits and _ . / - and must end in an extension; a full stop after
// it ends the sentence, not the path.
var writeRE = regexp.MustCompile(`(?i)\bwrites?\s+(?:[a-z ]{0,60}?\bto\s+)?([A-Za-z0-9_./-]+\.[A-Za-z0-9]+)`)

// errUsage marks a mistake on the command line: exit status 2.
var errUsage = errors.New("usage: demoagent [-work DURATION] [-fail] PROMPT")

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// run is the whole command. Its error, if any, is the one line printed on
// stderr, which stepseq stores as the step's error.
func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demoagent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	work := fs.Duration("work", 300*time.Millisecond, "how long to pretend to work")
	fail := fs.Bool("fail", false, "always fail")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if fs.NArg() == 0 {
		return errUsage
	}
	prompt := fs.Arg(fs.NArg() - 1)

	time.Sleep(*work)
	if *fail {
		return errors.New("simulated failure: -fail is set")
	}
	if isFlaky(prompt) {
		return errors.New("simulated failure: upstream timed out")
	}

	workspace := os.Getenv("STEPSEQ_WORKSPACE")
	if workspace == "" {
		workspace = "."
	}
	root, err := os.OpenRoot(workspace)
	if err != nil {
		return fmt.Errorf("open workspace: %w", err)
	}
	defer root.Close()

	step := os.Getenv("STEPSEQ_STEP")
	if step == "" {
		step = "manual"
	}
	try := os.Getenv("STEPSEQ_TRY")
	if try == "" {
		try = "1"
	}

	paths := outputPaths(prompt)
	if len(paths) == 0 {
		fmt.Fprintln(stdout, "nothing to write: the prompt names no file after \"write\"")
		return nil
	}
	for _, p := range paths {
		if !filepath.IsLocal(p) {
			fmt.Fprintf(stderr, "refused %s: not a relative path inside the workspace\n", p)
			continue
		}
		if err := writeOutput(root, p, content(p, step, try)); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", p)
	}
	return nil
}

// isFlaky reports whether a prompt should fail: it carries the flaky marker
// and is a first try, not stepseq's troubleshoot prompt.
func isFlaky(prompt string) bool {
	return strings.Contains(prompt, flakyMarker) && !strings.HasPrefix(prompt, retryPrefix)
}

// outputPaths returns the paths the prompt asks to write, in order of first
// mention, without duplicates. It does not judge them: the caller refuses
// absolute and escaping ones.
func outputPaths(prompt string) []string {
	var paths []string
	seen := map[string]bool{}
	for _, m := range writeRE.FindAllStringSubmatch(prompt, -1) {
		p := m[1]
		if !seen[p] {
			seen[p] = true
			paths = append(paths, p)
		}
	}
	return paths
}

// writeOutput creates name and its parent directories inside root.
func writeOutput(root *os.Root, name string, data []byte) error {
	if dir := filepath.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	if err := root.WriteFile(name, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// content returns a few plausible lines for a file, shaped by its extension.
func content(name, step, try string) []byte {
	now := time.Now().UTC().Format(time.RFC3339)
	title := strings.TrimSuffix(path.Base(filepath.ToSlash(name)), path.Ext(name))
	switch strings.ToLower(path.Ext(name)) {
	case ".md":
		return fmt.Appendf(nil, "# %s\n\nWritten by demoagent for step %s (try %s) at %s.\n\n"+
			"- Solar panels turn sunlight into electricity.\n"+
			"- Output depends on latitude, season and cloud cover.\n"+
			"- Storage evens out the gap between noon and evening demand.\n",
			title, step, try, now)
	case ".json":
		return fmt.Appendf(nil, "{\"writer\": \"demoagent\", \"step\": %q, \"try\": %q, \"time\": %q}\n",
			step, try, now)
	case ".csv":
		return fmt.Appendf(nil, "step,try,time\n%s,%s,%s\n", step, try, now)
	default:
		return fmt.Appendf(nil, "%s\nwritten by demoagent for step %s (try %s) at %s\n",
			title, step, try, now)
	}
}
