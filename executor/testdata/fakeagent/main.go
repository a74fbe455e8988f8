// Command fakeagent is the agent of executor's tests: a real process, not a shell,
// that obeys the directives in its prompt (see executor/fakeagent_test.go).
package main

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
)

func main() { os.Exit(fakeAgent(os.Args[1:])) }

// fakeAgent is one switch over the directives a test's prompt gives, kept flat so
// that each directive reads beside its effect; it is a test tool, not the product.
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
		case "stamp":
			_ = os.MkdirAll(filepath.Dir(arg), 0o755)
			_ = os.WriteFile(arg, []byte(strconv.FormatInt(time.Now().UnixNano(), 10)), 0o644)
		case "count":
			_ = os.MkdirAll(filepath.Dir(arg), 0o755)
			if f, err := os.OpenFile(arg, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
				fmt.Fprintf(f, "%s %s %d %d\n", os.Getenv("STEPSEQ_STEP"), os.Getenv("STEPSEQ_TRY"), os.Getpid(), time.Now().UnixNano())
				_ = f.Close()
			}
		case "write":
			_ = os.MkdirAll(filepath.Dir(arg), 0o755)
			_ = os.WriteFile(arg, []byte("output\n"), 0o644)
		case "put":
			// put:PATH=TEXT writes TEXT, %-escaped (%20 a space, %0A a newline).
			path, text, _ := strings.Cut(arg, "=")
			if t, err := url.PathUnescape(text); err == nil {
				text = t
			}
			_ = os.MkdirAll(filepath.Dir(path), 0o755)
			_ = os.WriteFile(path, []byte(text), 0o644)
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
		case "straggler":
			// A background child in the agent's group that ignores SIGTERM and
			// outlives the agent, its pid in PATH once it ignores the signal.
			self, _ := os.Executable()
			cmd := exec.Command(self, "ignoreterm pidfile:"+arg+" sleep:120s")
			_ = cmd.Start()
			waitForFile(arg)
		case "late":
			// A background job in the agent's group that makes PATH after the
			// agent exits, once PATH.go exists, then lingers; its pid in PATH.pid.
			self, _ := os.Executable()
			cmd := exec.Command(self, "pidfile:"+arg+".pid waitfor:"+arg+".go write:"+arg+" sleep:120s")
			_ = cmd.Start()
			waitForFile(arg + ".pid")
		case "twin":
			// Hold a non-blocking flock on DIR/<step>.lock while running: a twin
			// of this step alive at the same time finds it taken, and appends
			// "STEP TRY PID NS" to DIR/overlaps. The lock is held until exit.
			_ = os.MkdirAll(arg, 0o755)
			step := os.Getenv("STEPSEQ_STEP")
			f, err := os.OpenFile(filepath.Join(arg, step+".lock"), os.O_RDWR|os.O_CREATE, 0o644)
			if err == nil {
				if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
					if o, err := os.OpenFile(filepath.Join(arg, "overlaps"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
						fmt.Fprintf(o, "%s %s %d %d\n", step, os.Getenv("STEPSEQ_TRY"), os.Getpid(), time.Now().UnixNano())
						_ = o.Close()
					}
				}
				defer f.Close()
			}
		case "slots":
			// slots:DIR/N holds one of N flocks DIR/slot<i> while running: an
			// agent that finds all N taken (more than N agents at once) appends
			// "STEP TRY PID NS" to DIR/over.
			dir, n := filepath.Split(arg)
			max, _ := strconv.Atoi(n)
			_ = os.MkdirAll(dir, 0o755)
			held := false
			for i := 0; i < max && !held; i++ {
				f, err := os.OpenFile(filepath.Join(dir, "slot"+strconv.Itoa(i)), os.O_RDWR|os.O_CREATE, 0o644)
				if err != nil {
					continue
				}
				if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
					held = true
					defer f.Close()
				} else {
					f.Close()
				}
			}
			if !held {
				if o, err := os.OpenFile(filepath.Join(dir, "over"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
					fmt.Fprintf(o, "%s %s %d %d\n", os.Getenv("STEPSEQ_STEP"), os.Getenv("STEPSEQ_TRY"), os.Getpid(), time.Now().UnixNano())
					_ = o.Close()
				}
			}
		case "daemon":
			// A child in a session of its own (setsid), which ignores SIGTERM and
			// outlives the agent; its pid in PATH.
			self, _ := os.Executable()
			cmd := exec.Command(self, "ignoreterm pidfile:"+arg+" sleep:120s")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			_ = cmd.Start()
			waitForFile(arg)
		case "stray":
			// A child in a session of its own, with an empty environment and
			// without the try lock (fd 3), which ignores SIGTERM and outlives
			// the agent: nothing names its try. Its pid in PATH.
			syscall.CloseOnExec(3)
			self, _ := os.Executable()
			cmd := exec.Command(self, "ignoreterm pidfile:"+arg+" sleep:120s")
			cmd.Env = []string{}
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			_ = cmd.Start()
			waitForFile(arg)
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
		default:
			confinement(verb, arg)
		}
	}
	return code
}

// confinement runs the directives that try what a sandbox allows, each saying
// on stdout whether it could.
func confinement(verb, arg string) {
	switch verb {
	case "try":
		// try:PATH writes PATH and says on stdout whether it could.
		fmt.Println(outcome("try "+arg, os.WriteFile(arg, []byte("escaped\n"), 0o644)))
	case "dial":
		// dial:HOST:PORT connects over TCP and says whether it could.
		c, err := net.DialTimeout("tcp", arg, 2*time.Second)
		if err == nil {
			c.Close()
		}
		fmt.Println(outcome("dial "+arg, err))
	case "env":
		v, ok := os.LookupEnv(arg)
		fmt.Printf("env %s set=%v %s\n", arg, ok, v)
	case "report":
		if arg == "" {
			break // the word in a prompt's hint
		}
		// report:BIN runs BIN report done, as an agent told to report does.
		for _, status := range []string{"accepted", "done"} {
			out, err := exec.Command(arg, "report", status, "--summary", "did it", "--evidence", "out", "--risk", "none", "--next", "none").CombinedOutput()
			fmt.Println(outcome("report "+status, err), strings.ReplaceAll(strings.TrimSpace(string(out)), "\n", " | "))
		}
	}
}

// outcome is what a try says: "WHAT ok", or "WHAT denied: ERR".
func outcome(what string, err error) string {
	if err != nil {
		return what + " denied: " + err.Error()
	}
	return what + " ok"
}

func ignoreTerm() { signal.Ignore(syscall.SIGTERM) }

// waitForFile blocks until path exists, woken by fsnotify rather than a poll.
// Its folder need not exist yet: the nearest folder above it that does is
// watched, and each wake watches what has been made since.
func waitForFile(path string) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return
	}
	defer w.Close()
	for {
		dir := filepath.Dir(path)
		for w.Add(dir) != nil && filepath.Dir(dir) != dir {
			dir = filepath.Dir(dir)
		}
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case <-w.Events:
		case <-w.Errors:
		}
	}
}
