package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/stepseq/stepseq/executor/proc"
)

// oneStop is how long after a first signal more signals are the same stop:
// coreutils timeout, a terminal's Ctrl-C and process managers signal the process
// and then its group, so one stop often arrives as two signals.
const oneStop = 500 * time.Millisecond

// Main runs stepseq with the process's arguments and returns its exit code;
// version is what `stepseq version` prints. The first SIGINT or SIGTERM starts
// a graceful stop; a second one, once the stop is under way, exits at once.
func Main(v string) int {
	// Launched again as its own keeper, stepseq is nothing else; otherwise
	// its agents are launched through a keeper (see ARCHITECTURE.md, crash
	// safety).
	if code, keeper := proc.KeeperMain(); keeper {
		return code
	}
	info, ok := debug.ReadBuildInfo()
	version = buildVersion(v, info, ok)
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		cancel()
		window := time.After(oneStop)
		for {
			select {
			case <-signals: // the same stop
			case <-window:
				fmt.Fprintln(os.Stderr, "stepseq: stopping; a second signal exits at once")
				<-signals
				fmt.Fprintln(os.Stderr, "stepseq: second signal: exiting now")
				os.Exit(130)
			}
		}
	}()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	cancel()
	return exitCode(err, os.Stderr)
}

// exitCode prints err and maps it to the documented exit codes: 0 success, 1 a
// failed check or invalid input, 2 a usage or configuration error.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var ex *exitError
	if errors.As(err, &ex) {
		if ex.err != nil {
			fmt.Fprintln(stderr, "stepseq:", ex.err)
		}
		return ex.code
	}
	fmt.Fprintln(stderr, "stepseq:", err)
	return codeFor(err)
}

// exitError carries an exit code chosen by a command.
type exitError struct {
	code int
	err  error // printed when not nil
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// buildVersion is the version stepseq says: the one the build set (make build, from
// git describe), else the module version the Go tool stamped (go install
// github.com/stepseq/stepseq@v1.2.3, or a pseudo-version built from the commit of a
// checkout), else "dev".
func buildVersion(set string, info *debug.BuildInfo, ok bool) string {
	if set != "" && set != "dev" {
		return set
	}
	if ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "dev"
}
