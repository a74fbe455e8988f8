// Command testreport reads `go test -json` on its standard input, keeps the
// stream whole in a file, and prints what a reader of a CI log needs: each
// package's result as it comes, and at the end the last lines of every test
// that failed or never finished, and the slowest tests. It exits 1 when
// anything failed, so that `go test -json ./... | testreport -o file` fails as
// go test would (with pipefail, go test's own status counts too).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// tailLines is how many of a failed test's last output lines are printed.
const tailLines = 40

func main() {
	out := flag.String("o", "", "write the `go test -json` stream to this file as well")
	slowest := flag.Int("slowest", 10, "print the n slowest tests")
	flag.Parse()
	var keep io.Writer = io.Discard
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testreport:", err)
			os.Exit(2)
		}
		defer f.Close()
		keep = f
	}
	r := newReport()
	if err := r.read(os.Stdin, keep, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	r.summary(os.Stdout, *slowest)
	if *out != "" {
		fmt.Printf("the whole output: %s\n", *out)
	}
	if !r.ok() {
		os.Exit(1)
	}
}

// event is one record of `go test -json` (see `go doc test2json`).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

type key struct{ pkg, test string }

// run is what is known of one test (or, with no test, of one package's own
// output), for its latest run under -count.
type run struct {
	key
	lines   []string // the last tailLines lines
	after   int      // lines kept since a panic, -1 before one
	done    bool     // passed, failed or skipped
	failed  bool
	elapsed time.Duration
}

// add keeps line among the last. After a panic (a timeout's goroutine dump
// may run to thousands of lines) half the lines are kept for what led to it
// and half for the panic itself.
func (r *run) add(line string) {
	switch {
	case r.after >= tailLines/2:
		return
	case r.after >= 0:
		r.after++
	case strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: "):
		r.after = 1
		if n := len(r.lines) - tailLines/2; n > 0 {
			r.lines = slices.Delete(r.lines, 0, n)
		}
	}
	if len(r.lines) == tailLines {
		r.lines = slices.Delete(r.lines, 0, 1)
	}
	r.lines = append(r.lines, line)
}

type report struct {
	runs   map[key]*run
	order  []key // first seen first
	failed []run // every failed run of a test, and failed packages, in order
	timed  []run // every finished test, for the slowest
}

func newReport() *report { return &report{runs: map[key]*run{}} }

func (r *report) get(k key) *run {
	if x, ok := r.runs[k]; ok {
		return x
	}
	x := &run{key: k, after: -1}
	r.runs[k] = x
	r.order = append(r.order, k)
	return x
}

// read consumes the stream, copying it to keep and the packages' results to
// live.
func (r *report) read(in io.Reader, keep, live io.Writer) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		fmt.Fprintf(keep, "%s\n", line)
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(live, "%s\n", line) // not go test's JSON: pass it on
			continue
		}
		r.event(e, live)
	}
	return sc.Err()
}

func (r *report) event(e event, live io.Writer) {
	x := r.get(key{e.Package, e.Test})
	switch e.Action {
	case "run":
		x.lines, x.after, x.done, x.failed = nil, -1, false, false
	case "output", "build-output":
		x.add(strings.TrimRight(e.Output, "\n"))
		if e.Test == "" {
			fmt.Fprint(live, e.Output) // ok, FAIL, a build error
		}
	case "pass", "skip", "fail":
		x.done = true
		x.failed = e.Action == "fail"
		x.elapsed = time.Duration(e.Elapsed * float64(time.Second))
		if x.failed {
			f := *x
			f.lines = slices.Clone(x.lines)
			r.failed = append(r.failed, f)
		}
		if e.Test != "" {
			if x.failed {
				fmt.Fprintf(live, "--- FAIL: %s %s (%.2fs)\n", e.Package, e.Test, e.Elapsed)
			}
			if e.Action != "skip" {
				r.timed = append(r.timed, *x)
			}
		}
	}
}

// ok reports whether no test and no package failed.
func (r *report) ok() bool { return len(r.failed) == 0 }

// summary prints every failed run's last lines, the tests that never
// finished in a package that failed (a panic, a timeout), a failed package's
// own last lines when none of its tests says why, and the slowest tests.
func (r *report) summary(w io.Writer, slowest int) {
	explained := map[string]bool{}
	tests, pkgs := 0, 0
	for _, x := range r.failed {
		if x.test == "" {
			pkgs++
			continue
		}
		tests++
		explained[x.pkg] = true
		fmt.Fprintf(w, "\n=== FAILED %s %s (%.2fs), its last lines:\n", x.pkg, x.test, x.elapsed.Seconds())
		printLines(w, x.lines)
	}
	for _, x := range r.failed {
		if x.test != "" {
			continue
		}
		for _, k := range r.order {
			if y := r.runs[k]; k.pkg == x.pkg && k.test != "" && !y.done {
				explained[x.pkg] = true
				fmt.Fprintf(w, "\n=== DID NOT FINISH %s %s, its last lines:\n", k.pkg, k.test)
				printLines(w, y.lines)
			}
		}
		if !explained[x.pkg] {
			fmt.Fprintf(w, "\n=== FAILED package %s, its last lines:\n", x.pkg)
			printLines(w, x.lines)
		}
	}
	if slowest > 0 && len(r.timed) > 0 {
		slices.SortStableFunc(r.timed, func(a, b run) int { return int(b.elapsed - a.elapsed) })
		fmt.Fprintf(w, "\nthe %d slowest tests:\n", min(slowest, len(r.timed)))
		for _, x := range r.timed[:min(slowest, len(r.timed))] {
			fmt.Fprintf(w, "%8.2fs  %s %s\n", x.elapsed.Seconds(), x.pkg, x.test)
		}
	}
	if !r.ok() {
		fmt.Fprintf(w, "\nFAIL: %d failed tests, %d failed packages\n", tests, pkgs)
	}
}

func printLines(w io.Writer, lines []string) {
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}
