package executor

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The test binary doubles as the agent: run with STEPSEQ_FAKE_AGENT=1 it obeys the
// directives in its prompt, so tests launch a real process
// without a shell. Directives, separated by spaces:
//
//	write:PATH      create PATH (relative to the working directory)
//	out:TEXT        print TEXT on stdout      err:TEXT   print TEXT on stderr
//	exit:N          exit with status N
//	sleep:DUR       sleep before exiting
//	failfirst:PATH  fail (exit 1, "first try fails") unless PATH exists; create it
//	grandchild:DUR  leave a child holding stdout and stderr for DUR
//	ignoreterm      ignore SIGTERM (the group must be SIGKILLed)
//	envfile:PATH    write the STEPSEQ_* variables to PATH
//	argsfile:PATH   write the argv, one per line, to PATH
//	pidfile:PATH    write the pid to PATH, then continue
//	waitfor:PATH    block until PATH exists (tests release the agent)
func TestMain(m *testing.M) {
	if os.Getenv("STEPSEQ_FAKE_AGENT") == "1" {
		os.Exit(fakeAgent(os.Args[1:]))
	}
	if path := os.Getenv("STEPSEQ_TEST_WRITER"); path != "" {
		os.Exit(stateWriter(path))
	}
	os.Exit(m.Run())
}

func fakeAgent(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "fake agent: no prompt")
		return 3
	}
	// The prompt is the last argument, or with {prompt} the last one holding a directive.
	prompt := args[len(args)-1]
	for i := len(args) - 1; i >= 0; i-- {
		if strings.Contains(args[i], ":") {
			prompt = args[i]
			break
		}
	}
	code := 0
	for _, d := range strings.Fields(prompt) {
		verb, arg, _ := strings.Cut(d, ":")
		switch verb {
		case "write":
			_ = os.MkdirAll(filepath.Dir(arg), 0o755)
			_ = os.WriteFile(arg, []byte("output\n"), 0o644)
		case "out":
			fmt.Println(arg)
		case "err":
			fmt.Fprintln(os.Stderr, arg)
		case "exit":
			code, _ = strconv.Atoi(arg)
		case "sleep":
			d, _ := time.ParseDuration(arg)
			time.Sleep(d)
		case "failfirst":
			if _, err := os.Stat(arg); err != nil {
				_ = os.WriteFile(arg, nil, 0o644)
				fmt.Fprint(os.Stderr, "first try fails")
				return 1
			}
		case "grandchild":
			cmd := exec.Command("sleep", strings.TrimSuffix(arg, "s"))
			cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
			_ = cmd.Start()
		case "ignoreterm":
			ignoreTerm()
		case "envfile":
			var b strings.Builder
			for _, k := range []string{"STEPSEQ_STEP", "STEPSEQ_TRY", "STEPSEQ_WORKSPACE", "STEPSEQ_STATE"} {
				fmt.Fprintf(&b, "%s=%s\n", k, os.Getenv(k))
			}
			_ = os.WriteFile(arg, []byte(b.String()), 0o644)
		case "argsfile":
			_ = os.WriteFile(arg, []byte(strings.Join(args, "\n")), 0o644)
		case "pidfile":
			_ = os.WriteFile(arg, []byte(strconv.Itoa(os.Getpid())), 0o644)
		case "waitfor":
			waitForFile(arg)
		}
	}
	return code
}
