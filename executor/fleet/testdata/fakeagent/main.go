// Command fakeagent is the fleet tests' agent: a real process, not a shell,
// that obeys the words of its prompt (its last argument):
//
//	write:PATH     write PATH in the workspace, naming the step and try
//	stamp:PATH     append the time, in ns since the epoch, to PATH (absolute)
//	pidfile:PATH   write the pid to PATH (absolute; a file per step, in $FAKEAGENT_DIR)
//	waitfor:PATH   block until PATH exists (the tests release it)
//	fail:N         exit 1 while STEPSEQ_TRY < N
//
// While it runs it holds the flock $FAKEAGENT_DIR/STEP.lock; finding it held
// by a twin (another agent of the same step, on any worker) it appends a line
// to $FAKEAGENT_DIR/overlaps.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "fakeagent: no prompt")
		os.Exit(2)
	}
	step, try := os.Getenv("STEPSEQ_STEP"), os.Getenv("STEPSEQ_TRY")
	if dir := os.Getenv("FAKEAGENT_DIR"); dir != "" {
		f, err := os.OpenFile(filepath.Join(dir, step+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
		if err == nil {
			if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
				appendLine(filepath.Join(dir, "overlaps"), fmt.Sprintf("%s try %s pid %d", step, try, os.Getpid()))
			}
			defer f.Close()
		}
	}
	for _, word := range strings.Fields(os.Args[len(os.Args)-1]) {
		key, val, _ := strings.Cut(word, ":")
		switch key {
		case "write":
			_ = os.MkdirAll(filepath.Dir(val), 0o755)
			if err := os.WriteFile(val, []byte(fmt.Sprintf("%s try %s\n", step, try)), 0o644); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		case "stamp":
			appendLine(val, strconv.FormatInt(time.Now().UnixNano(), 10))
		case "pidfile":
			_ = os.WriteFile(val, []byte(strconv.Itoa(os.Getpid())), 0o644)
		case "waitfor":
			for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if _, err := os.Stat(val); err == nil {
					break
				}
			}
		case "fail":
			n, _ := strconv.Atoi(val)
			if t, _ := strconv.Atoi(try); t < n {
				fmt.Fprintln(os.Stderr, "failing on purpose")
				os.Exit(1)
			}
		}
	}
}

func appendLine(path, line string) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintln(f, line)
	f.Close()
}
