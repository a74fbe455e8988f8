package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/planspec"
	planpkg "github.com/stepseq/stepseq/planspec/plan"
)

// TestMain lets the test binary be stepseq, and the agents the scripts need, as
// commands on the scripts' PATH.
func TestMain(m *testing.M) {
	testscript.Main(builtCleanup{m}, map[string]func(){
		"stepseq":   func() { os.Exit(Main(version)) },
		"fakeagent": fakeAgent,
	})
}

// builtCleanup runs the tests, then removes the binaries builtBinaries made.
type builtCleanup struct{ m *testing.M }

func (c builtCleanup) Run() int {
	code := c.m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	return code
}

// TestScripts runs every testdata/script/*.txtar: the command line, end to end.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			env.Setenv("TZ", "UTC")
			// Under -race every process sleeps a second at exit, by default, so
			// that the report of a race can be written; the scripts start many.
			env.Setenv("GORACE", strings.TrimSpace(env.Getenv("GORACE")+" atexit_sleep_ms=0"))
			// $GITONLY is a PATH with git and nothing else: a machine without stepseq.
			if git, err := exec.LookPath("git"); err == nil {
				dir := filepath.Join(env.WorkDir, ".gitonly")
				if err := os.Mkdir(dir, 0o755); err != nil {
					return err
				}
				if err := os.Symlink(git, filepath.Join(dir, "git")); err != nil {
					return err
				}
				env.Setenv("GITONLY", dir)
			}
			// $EXAMPLES is the repository's examples/: scripts run its plans as they are.
			examples, err := filepath.Abs("../../examples")
			if err != nil {
				return err
			}
			env.Setenv("EXAMPLES", examples)
			// $ORIGINAL holds a model of the original check and runner scripts.
			original, err := filepath.Abs("testdata/original")
			if err != nil {
				return err
			}
			env.Setenv("ORIGINAL", original)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"executable": cmdExecutable,
			"exits":      cmdExits,
			"waitfile":   cmdWaitFile,
			"validjson":  cmdValidJSON,
		},
	})
}

// fakeAgent is an agent that is not a shell, for the scripts. Its last argument
// is the prompt; words in it say what to do:
//
//	write:PATH      write PATH (parents made), naming the step and try
//	prompt:PATH     write the whole prompt to PATH
//	out:TEXT        print TEXT to stdout
//	env:NAME        print NAME=its value, or NAME unset
//	err:TEXT        print TEXT to stderr
//	fail-before:N   exit 1, saying so on stderr, while STEPSEQ_TRY < N
//	exit:N          exit with status N after everything else
//	wait:PATH       wait until PATH exists (for a minute at most)
//	report:STATUS   run stepseq report STATUS with every field; a refusal is printed
//	blocked-before:N  while STEPSEQ_TRY < N, report blocked (next: put a token in .env)
//	                and exit 0 at once
//	approve:STEP    run stepseq approve STEP, as an agent might to open its own gate;
//	                the answer or the refusal is printed
//	drop:STATUS     drop the seed's plain block in $STEPSEQ_REPORTS and wait for the
//	                verdict: the file taken (accepted) or renamed .rejected
//	spent:IN/OUT/USD  report accepted, then done with --tokens-in IN --tokens-out OUT
//	                --cost USD: what the try spent
//
// With FAKEAGENT_ANSWERS set, it answers from that file instead (answer).
func fakeAgent() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "fakeagent: no prompt")
		os.Exit(2)
	}
	if answer() {
		os.Exit(0)
	}
	try, _ := strconv.Atoi(os.Getenv("STEPSEQ_TRY"))
	code := 0
	for _, word := range strings.Fields(os.Args[len(os.Args)-1]) {
		key, val, ok := strings.Cut(word, ":")
		if !ok {
			continue
		}
		switch key {
		case "write":
			writeFile(val, fmt.Sprintf("written by fakeagent for step %s try %d\n", os.Getenv("STEPSEQ_STEP"), try))
		case "prompt":
			writeFile(val, os.Args[len(os.Args)-1]+"\n")
		case "out":
			fmt.Println(val)
		case "env":
			if v, ok := os.LookupEnv(val); ok {
				fmt.Printf("%s=%s\n", val, v)
			} else {
				fmt.Printf("%s unset\n", val)
			}
		case "err":
			fmt.Fprintln(os.Stderr, val)
		case "fail-before":
			if n, _ := strconv.Atoi(val); try < n {
				fmt.Fprintf(os.Stderr, "fakeagent: try %d fails on purpose\n", try)
				code = 1
			}
		case "exit":
			if n, err := strconv.Atoi(val); err == nil && code == 0 {
				code = n
			}
		case "report":
			cmd := exec.Command("stepseq", "report", val, "--summary", "fake "+val, "--evidence", "evidence of "+val,
				"--risk", "low — a test", "--next", "the next thing")
			if out, err := cmd.CombinedOutput(); err != nil {
				fmt.Printf("report %s refused: %s", val, out)
			} else {
				fmt.Printf("report %s: %s", val, out)
			}
		case "done-result":
			// Accepted, then done with val as its result (JSON without spaces).
			for _, status := range []string{"accepted", "done"} {
				args := []string{"report", status, "--summary", "fake " + status, "--evidence", "evidence of " + status,
					"--risk", "low — a test", "--next", "the next thing"}
				if status == "done" {
					args = append(args, "--result", val)
				}
				out, err := exec.Command("stepseq", args...).CombinedOutput()
				if err != nil {
					fmt.Printf("report %s refused: %s", status, out)
				}
			}
		case "approve":
			out, err := exec.Command("stepseq", "approve", val).CombinedOutput()
			if err != nil {
				fmt.Printf("approve refused: %s", out)
			} else {
				fmt.Printf("approve: %s", out)
			}
		case "drop":
			fmt.Println(dropReport(val, try))
		case "spent":
			fmt.Println(reportSpent(val))
		case "blocked-before":
			if n, _ := strconv.Atoi(val); try < n {
				out, err := exec.Command("stepseq", "report", "blocked", "--summary", "no credentials", "--evidence", "401 from the API",
					"--risk", "high — cannot go on", "--next", "put a token in .env").CombinedOutput()
				fmt.Printf("report blocked: %s", out)
				if err != nil {
					os.Exit(4)
				}
				os.Exit(0)
			}
		case "wait":
			awaitFile(val)
		}
	}
	os.Exit(code)
}

// drops counts the reports a fake agent dropped, to name each file once.
var drops int

// dropReport writes the seed's block as the seed writes it, a colon inside a value
// and all, and waits for stepseq's verdict on it.
func dropReport(status string, try int) string {
	dir := os.Getenv("STEPSEQ_REPORTS")
	block := fmt.Sprintf("status: %s\nsummary: dropped %s\nevidence: opened sources.md: 3 links found\nrisk: low — read only\nnext: write study/summary.md\n", status, status)
	drops++
	path := filepath.Join(dir, fmt.Sprintf("%d-%s-%d.txt", try, status, drops))
	writeFile(path+".tmp", block)
	if err := os.Rename(path+".tmp", path); err != nil {
		return "drop: " + err.Error()
	}
	// stepseq writes <file>.why, then renames the file <file>.rejected: once
	// the file is gone, .rejected tells a refusal from a file taken, and .why is
	// whole.
	for deadline := time.Now().Add(effectWait); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			continue
		}
		if _, err := os.Stat(path + ".rejected"); os.IsNotExist(err) {
			return "drop " + status + " accepted"
		}
		why, err := os.ReadFile(path + ".why")
		if err != nil {
			return "drop: " + err.Error()
		}
		return fmt.Sprintf("drop %s refused: %s", status, strings.TrimSpace(string(why)))
	}
	return "drop " + status + ": no verdict"
}

func writeFile(path, content string) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "fakeagent:", err)
		os.Exit(3)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "fakeagent:", err)
		os.Exit(3)
	}
}

// cmdExits runs a program and checks its exit status exactly: `! exec` accepts any
// failure, and the documented codes (1 invalid input, 2 usage or configuration)
// are part of the contract. Its stdout and stderr are kept for the next commands.
//
//	exits N PROG [ARG...]
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits N PROG [ARG...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			ts.Fatalf("%s: %v", args[1], err)
		}
		got = exit.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

// effectWait bounds the tests' waits for an effect of stepseq: a file, a
// record, an exit, an answer. A passing test never waits it out, so it is
// generous: on two cores shared with other builds, under -race, what takes a
// second alone can take a minute.
const effectWait = 5 * time.Minute

// cmdWaitFile waits until a file exists and, with a pattern, until its content
// matches it: the script's handshake with a command it started in the background.
// It polls a condition with a deadline; it never sleeps a fixed time as a
// synchronisation.
//
//	waitfile FILE [REGEXP]
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: waitfile FILE [REGEXP]")
	}
	var re *regexp.Regexp
	if len(args) == 2 {
		re = regexp.MustCompile(args[1])
	}
	path := ts.MkAbs(args[0])
	deadline := time.Now().Add(effectWait)
	for {
		data, err := os.ReadFile(path)
		if err == nil && (re == nil || re.Match(data)) {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waitfile %s: not there after %s (last content %q)", args[0], effectWait, data)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// cmdValidJSON checks that a file (or stdout) is one valid JSON value.
//
//	validjson FILE
func cmdValidJSON(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: validjson FILE")
	}
	ok := json.Valid([]byte(ts.ReadFile(args[0])))
	if ok == neg {
		ts.Fatalf("validjson %s: valid is %v", args[0], ok)
	}
}

// cmdExecutable checks that files are executable by their owner.
//
//	executable FILE...
func cmdExecutable(ts *testscript.TestScript, neg bool, args []string) {
	for _, f := range args {
		fi, err := os.Stat(ts.MkAbs(f))
		ts.Check(err)
		if x := fi.Mode()&0o100 != 0; x == neg {
			ts.Fatalf("%s: mode %v", f, fi.Mode())
		}
	}
}

// TestWaitsFor_InvalidCondition: a condition that does not compile is reported,
// and status exits 1 after printing what it can.
func TestWaitsFor_InvalidCondition(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	js := `{"plan": {"steps": {"a": {"title": "A", "instruction": "x", "when": "exists("}}},
		"stepQueue": ["a"], "currentStep": 0, "stepRuns": {}, "stepDelayMinutes": 0,
		"blockers": [], "artifacts": [], "status": "IN_PROGRESS"}`
	if err := os.WriteFile(state, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"status", dir}, &stdout, &stderr)
	if code := exitCode(err, &stderr); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if !errors.Is(err, planspec.ErrInvalidState) {
		t.Errorf("err = %v, want planspec.ErrInvalidState", err)
	}
	for _, want := range []string{"plan.steps.a.when", "not valid"} {
		if !strings.Contains(stdout.String()+stderr.String(), want) {
			t.Errorf("output lacks %q:\nstdout:\n%s\nstderr:\n%s", want, &stdout, &stderr)
		}
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		850 * time.Millisecond:                     "850ms",
		12*time.Second + 400*time.Millisecond:      "12s",
		3*time.Minute + 4*time.Second:              "3m4s",
		time.Hour + 2*time.Minute + 10*time.Second: "1h2m",
		2 * time.Hour:                              "2h",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestPaint(t *testing.T) {
	tests := []struct {
		in    string
		color bool
		want  string
	}{
		{"DONE", true, "\x1b[32mDONE\x1b[0m"},
		{"DONE (skipped)", true, "\x1b[32mDONE\x1b[0m (skipped)"},
		{"FAILED", true, "\x1b[31mFAILED\x1b[0m"},
		{"IN_PROGRESS", true, "\x1b[33mIN_PROGRESS\x1b[0m"},
		{"PENDING", true, "PENDING"},
		{"DONE", false, "DONE"},
	}
	for _, tt := range tests {
		if got := paint(tt.in, tt.color); got != tt.want {
			t.Errorf("paint(%q, %v) = %q, want %q", tt.in, tt.color, got, tt.want)
		}
	}
	// Columns line up whatever the colour codes add.
	var plain, colored bytes.Buffer
	rows := [][]string{{"STEP", "STATUS", "TRIES"}, {"a", "DONE", "1"}, {"bb", "IN_PROGRESS", "2"}}
	writeTable(&plain, rows, 1, false)
	writeTable(&colored, rows, 1, true)
	stripped := regexp.MustCompile("\x1b\\[[0-9]*m").ReplaceAllString(colored.String(), "")
	if stripped != plain.String() {
		t.Errorf("coloured table, stripped:\n%s\nwant:\n%s", stripped, &plain)
	}
}

// reportWriter hands each report status --follow prints to the test: every
// report is one Write.
type reportWriter chan string

func (w reportWriter) Write(p []byte) (int, error) {
	w <- string(p)
	return len(p), nil
}

func (w reportWriter) next(t *testing.T) string {
	t.Helper()
	select {
	case r := <-w:
		return r
	case <-time.After(effectWait): // a failsafe, not a synchronisation
		t.Fatal("no report from status --follow")
		return ""
	}
}

// TestStatusFollow: --follow prints, then again on every replacement of the state
// file, ignores content that does not parse, and exits 0 once the plan is DONE.
func TestStatusFollow(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	const plan = `"plan": {"steps": {"a": {"title": "A", "instruction": "x"}, "b": {"title": "B", "instruction": "y"}}},
		"stepQueue": ["a", "b"], "stepDelayMinutes": 0, "blockers": [], "artifacts": []`
	first := `{` + plan + `, "currentStep": 0, "stepRuns": {"a": {"status": "IN_PROGRESS", "tries": 1}}, "status": "IN_PROGRESS"}`
	second := `{` + plan + `, "currentStep": 1, "stepRuns": {"a": {"status": "DONE", "tries": 1},
		"b": {"status": "IN_PROGRESS", "tries": 1}}, "status": "IN_PROGRESS"}`
	done := `{` + plan + `, "currentStep": 2, "stepRuns": {"a": {"status": "DONE", "tries": 1},
		"b": {"status": "DONE", "tries": 1}}, "status": "DONE"}`
	replace := func(content string) {
		t.Helper()
		tmp := filepath.Join(dir, ".state.json.tmp")
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, state); err != nil {
			t.Fatal(err)
		}
	}
	replace(first)

	reports := make(reportWriter, 4)
	var stderr bytes.Buffer
	errc := make(chan error, 1)
	go func() { errc <- run(t.Context(), []string{"status", "--follow", dir}, reports, &stderr) }()

	if r := reports.next(t); !strings.Contains(r, "now: a: running (try 1)") {
		t.Fatalf("first report:\n%s", r)
	}
	replace(`{"plan": `) // half a file: no report
	replace(second)
	if r := reports.next(t); !strings.Contains(r, "now: b: running (try 1)") || !strings.HasPrefix(r, "\n") {
		t.Fatalf("second report:\n%q", r)
	}
	replace(done)
	if r := reports.next(t); !strings.Contains(r, "now: plan DONE") {
		t.Fatalf("last report:\n%s", r)
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("status --follow: %v\n%s", err, &stderr)
		}
	case <-time.After(effectWait):
		t.Fatal("status --follow did not exit once the plan was DONE")
	}
}

// TestStatusFollow_Cancel: an interrupt (the command's context ending) is a
// normal end of --follow: exit 0.
func TestStatusFollow_Cancel(t *testing.T) {
	dir := t.TempDir()
	js := `{"plan": {"steps": {"a": {"title": "A", "instruction": "x", "when": "exists(\"never\")"}}},
		"stepQueue": ["a"], "currentStep": 0, "stepRuns": {}, "stepDelayMinutes": 0,
		"blockers": [], "artifacts": [], "status": "IN_PROGRESS"}`
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	reports := make(reportWriter, 4)
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, []string{"status", "--follow", "--json", dir}, reports, io.Discard) }()
	r := reports.next(t)
	if !json.Valid([]byte(r)) || strings.Count(r, "\n") != 1 {
		t.Errorf("--follow --json report is not one JSON line:\n%s", r)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("status --follow after cancel: %v", err)
	}
}

// TestExamplePlan: the plan init writes is valid, whatever the schema path.
func TestExamplePlan(t *testing.T) {
	text := fmt.Sprintf(examplePlan, "../.stepseq/schema.json")
	p, err := planpkg.ParsePlan(strings.NewReader(text), "plans/example.yaml")
	if err != nil {
		t.Fatal(strings.Join(engine.ErrorLines(err), "\n"))
	}
	if len(p.Steps) != 2 || p.Name != "example" {
		t.Errorf("plan %q with %d steps, want example with 2", p.Name, len(p.Steps))
	}
}

// TestStatus_Color: status words are coloured on a terminal, unless NO_COLOR is
// set; never in a pipe or a file.
func TestStatus_Color(t *testing.T) {
	dir := t.TempDir()
	js := `{"plan": {"steps": {"a": {"title": "A", "instruction": "x"}, "b": {"title": "B", "instruction": "y"}}},
		"stepQueue": ["a", "b"], "currentStep": 1, "stepRuns": {"a": {"status": "DONE", "tries": 1},
		"b": {"status": "FAILED", "tries": 1, "error": "no"}}, "stepDelayMinutes": 0,
		"blockers": [], "artifacts": [], "status": "IN_PROGRESS"}`
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	status := func(t *testing.T, out io.Writer) {
		t.Helper()
		var stderr bytes.Buffer
		if err := run(t.Context(), []string{"status", dir}, out, &stderr); err != nil {
			t.Fatalf("status: %v\n%s", err, &stderr)
		}
	}
	onTerminal := func(t *testing.T) string {
		master, pts := openPTY(t)
		status(t, pts)
		// The report is in the terminal's buffer already; the deadline only ends
		// the read of it.
		if err := master.SetReadDeadline(time.Now().Add(2 * time.Second)); err != nil {
			t.Skipf("pty read deadline: %v", err)
		}
		var got []byte
		buf := make([]byte, 4096)
		for !bytes.Contains(got, []byte("now:")) {
			n, err := master.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				t.Fatalf("read terminal: %v; got %q", err, got)
			}
		}
		return string(got)
	}

	t.Run("terminal", func(t *testing.T) {
		t.Setenv("NO_COLOR", "")
		got := onTerminal(t)
		for _, want := range []string{"\x1b[32mDONE\x1b[0m", "\x1b[31mFAILED\x1b[0m", "\x1b[33mactive\x1b[0m"} {
			if !strings.Contains(got, want) {
				t.Errorf("no %q in:\n%q", want, got)
			}
		}
	})
	t.Run("NO_COLOR", func(t *testing.T) {
		t.Setenv("NO_COLOR", "1")
		if got := onTerminal(t); strings.Contains(got, "\x1b[") {
			t.Errorf("colour despite NO_COLOR:\n%q", got)
		}
	})
	t.Run("file", func(t *testing.T) {
		t.Setenv("NO_COLOR", "")
		f, err := os.Create(filepath.Join(t.TempDir(), "out"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		status(t, f)
		if data, _ := os.ReadFile(f.Name()); bytes.Contains(data, []byte("\x1b[")) || !bytes.Contains(data, []byte("FAILED")) {
			t.Errorf("report in a file:\n%q", data)
		}
	})
}

// TestInit_WithoutGit: with no git on PATH, --git-hooks finds .git by walking up,
// and --step, which needs git config, is a configuration error (exit 2) that
// writes nothing.
func TestInit_WithoutGit(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	repo := t.TempDir()
	if err := os.MkdirAll(filepath.Join(repo, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(repo, "ws")

	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"init", "--step", "build", ws}, &stdout, &stderr)
	if code := exitCode(err, &stderr); code != 2 || !strings.Contains(stderr.String(), "git is not on PATH") {
		t.Errorf("init --step without git: exit %d, stderr %q", code, &stderr)
	}
	if _, err := os.Stat(ws); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("init --step without git wrote %s", ws)
	}

	stdout.Reset()
	stderr.Reset()
	if err := run(t.Context(), []string{"init", "--git-hooks", ws}, &stdout, &stderr); err != nil {
		t.Fatalf("init --git-hooks: %v\n%s", err, &stderr)
	}
	for _, name := range []string{"post-commit", "post-checkout", "post-merge"} {
		fi, err := os.Stat(filepath.Join(repo, ".git", "hooks", name))
		if err != nil || fi.Mode()&0o111 == 0 {
			t.Errorf("hook %s: %v, %v", name, fi, err)
		}
	}
}

// TestCheck_NoStateSaysWhatToDo: check without a state file exits 0 and writes
// nothing, as the original, and says in one line, on a pipe as on a terminal,
// that there is no state.json in the folder and what makes one; a plan waiting
// in plans/, which check does not read, is named. --log-level warn keeps quiet.
func TestCheck_NoStateSaysWhatToDo(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	var pipe bytes.Buffer
	if err := run(t.Context(), []string{"check", state}, io.Discard, &pipe); err != nil {
		t.Fatalf("check: %v", err)
	}
	want := "stepseq: no state.json in " + dir + ": nothing to do. To start one: stepseq init " + dir
	if got := pipe.String(); !strings.HasPrefix(got, want) || strings.Count(got, "\n") != 1 || !strings.Contains(got, "stepseq apply ") {
		t.Errorf("check on a pipe said %q, want one line starting %q and naming stepseq apply", got, want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("check with no state made %d files, want none", len(entries))
	}

	if err := os.MkdirAll(filepath.Join(dir, "plans"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plans", "p.yaml"), []byte("steps:\n  - id: a\n    title: A\n    instruction: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var named bytes.Buffer
	if err := run(t.Context(), []string{"check", state}, io.Discard, &named); err != nil {
		t.Fatalf("check beside a plan: %v", err)
	}
	got := named.String()
	apply := "stepseq apply " + filepath.Join(dir, "plans", "p.yaml") + " " + dir
	if !strings.Contains(got, "not the plans in "+filepath.Join(dir, "plans")+" (p.yaml)") || !strings.Contains(got, apply) {
		t.Errorf("check beside a plan said %q, want the plan in plans/ named with %q", got, apply)
	}

	var quiet bytes.Buffer
	if err := run(t.Context(), []string{"check", "--log-level", "warn", state}, io.Discard, &quiet); err != nil || quiet.Len() != 0 {
		t.Errorf("check --log-level warn: %v, said %q; want nothing", err, quiet.String())
	}
}
