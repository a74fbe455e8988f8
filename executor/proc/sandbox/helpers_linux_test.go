package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The test binary started again as a helper: the launcher whose death the
// sandbox must follow, or a process without user namespaces to spare.
const helperVar = "STEPSEQ_SANDBOX_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperVar) {
	case "launch":
		os.Exit(helperLaunch())
	case "no-namespaces":
		os.Exit(helperNoNamespaces())
	}
	os.Exit(m.Run())
}

// helperLaunch starts the sandbox named by STEPSEQ_SANDBOX_ARGV and _ENV, says
// bwrap's pid and waits for it, as stepseq does.
func helperLaunch() int {
	var argv, env []string
	if err := json.Unmarshal([]byte(os.Getenv("STEPSEQ_SANDBOX_ARGV")), &argv); err != nil {
		fmt.Println(err)
		return 2
	}
	if err := json.Unmarshal([]byte(os.Getenv("STEPSEQ_SANDBOX_ENV")), &env); err != nil {
		fmt.Println(err)
		return 2
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.SysProcAttr = SysProcAttr()
	if err := cmd.Start(); err != nil {
		fmt.Println(err)
		return 2
	}
	fmt.Println(cmd.Process.Pid)
	_ = cmd.Wait()
	return 0
}

// helperNoNamespaces runs in a user namespace of its own, not root in it, with
// only CAP_SYS_RESOURCE: it lets no user namespace be made under it, drops the
// capability, and probes the sandbox, whose bwrap must then make one.
func helperNoNamespaces() int {
	if err := os.WriteFile("/proc/sys/user/max_user_namespaces", []byte("0"), 0); err != nil {
		fmt.Println("limit user namespaces:", err)
		return 2
	}
	// Capabilities belong to a thread: the one that drops it starts bwrap.
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		fmt.Println("drop capabilities:", err)
		return 2
	}
	err := Probe(context.Background(), Spec{Workspace: os.Getenv("STEPSEQ_SANDBOX_WS")})
	fmt.Print(err)
	if !errors.Is(err, ErrNoNamespaces) {
		return 1
	}
	return 0
}

// nobody is the user the tests run agents as when they run as root, so that both
// of bwrap's ways are tested: as root (no user namespace, capabilities dropped)
// and as anyone else (in a user namespace).
const nobody = 65534

// A runner starts sandboxes as one user.
type runner struct {
	name string
	// attr adds to SysProcAttr what makes the sandbox run as the runner's user.
	attr func(*syscall.SysProcAttr)
	// own hands the paths (their trees) to the runner's user.
	own func(t *testing.T, paths ...string)
}

func self() runner {
	return runner{name: "self", attr: func(*syscall.SysProcAttr) {}, own: func(*testing.T, ...string) {}}
}

// runners are the test process's own user, and the other kind: nobody when it is
// root, root of a user namespace of its own when it is not.
func runners() []runner {
	other := runner{name: "root-in-userns", own: func(*testing.T, ...string) {},
		attr: func(a *syscall.SysProcAttr) {
			a.Cloneflags = syscall.CLONE_NEWUSER
			a.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
			a.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
		}}
	if os.Geteuid() == 0 {
		other = runner{name: "nobody",
			attr: func(a *syscall.SysProcAttr) { a.Credential = &syscall.Credential{Uid: nobody, Gid: nobody} },
			own: func(t *testing.T, paths ...string) {
				t.Helper()
				for _, p := range paths {
					if p == "" {
						continue
					}
					err := filepath.WalkDir(p, func(path string, _ fs.DirEntry, err error) error {
						if err != nil {
							return err
						}
						return os.Lchown(path, nobody, nobody)
					})
					if err != nil {
						t.Fatal(err)
					}
				}
			}}
	}
	return []runner{self(), other}
}

// sandbox is one sandboxed agent, started.
type sandbox struct {
	t    *testing.T
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan struct{}
	argv []string
}

// start runs script with bash in spec's sandbox, as r's user.
func (r runner) start(t *testing.T, spec Spec, script string, extra ...*os.File) *sandbox {
	t.Helper()
	spec.Argv = []string{"bash", "-c", script}
	argv, env, err := Command(spec)
	if err != nil {
		t.Fatal(err)
	}
	// Command made what was missing as the test's user; stepseq runs as the agent's.
	r.own(t, append(append(spec.PresetDirs, spec.Write...), spec.ReportDir)...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	s := &sandbox{t: t, argv: argv, done: make(chan struct{})}
	s.cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
	s.cmd.Env = env
	s.cmd.SysProcAttr = SysProcAttr()
	r.attr(s.cmd.SysProcAttr)
	s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.out
	s.cmd.ExtraFiles = extra
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() { _ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL); <-s.done })
	return s
}

// wait returns the sandbox's output and exit code once it has ended.
func (s *sandbox) wait() (string, int) {
	s.t.Helper()
	select {
	case <-s.done:
	case <-time.After(time.Minute):
		s.t.Fatalf("the sandbox did not end; its output: %s", s.out.String())
	}
	return s.out.String(), s.cmd.ProcessState.ExitCode()
}

// run runs script in spec's sandbox as r's user and returns its output and exit code.
func (r runner) run(t *testing.T, spec Spec, script string) (string, int) {
	t.Helper()
	return r.start(t, spec, script).wait()
}

// waitFor waits for path to exist, as long as the sandbox runs.
func (s *sandbox) waitFor(path string) {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case <-s.done:
			s.t.Fatalf("the sandbox ended before %s existed; its output: %s", path, s.out.String())
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s did not appear; the sandbox's output: %s", path, s.out.String())
		}
		time.Sleep(pause)
	}
}

// waitGone waits until no living process's command line holds token; it
// returns those still living at the deadline.
func waitGone(token string, within time.Duration) []int {
	deadline := time.Now().Add(within)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		left := holding(token)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(pause)
	}
}

// holding lists the living processes (not zombies) whose command line holds token.
func holding(token string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(token)) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 0 && f[0] != "Z" && f[0] != "X" {
			pids = append(pids, pid)
		}
	}
	return pids
}

// workspace makes a workspace under /tmp, as stepseq's test workspaces are, so
// that every test also shows that the sandbox's private /tmp does not hide it. It
// has what stepseq and a project keep: run files, .stepseq, plans, git's folder,
// sources, a file at the top.
func workspace(t *testing.T) string {
	t.Helper()
	ws, err := os.MkdirTemp("/tmp", "stepseq-sandbox-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(ws) })
	files := map[string]string{
		"state.json":             `{"stepQueue":[]}`,
		"state.fix.json":         `{"stepQueue":[]}`,
		".stepseq/journal":       "j\n",
		"plans/p.yaml":           "name: p\n",
		".git/config":            "[core]\n",
		".git/hooks/pre-commit":  "#!/bin/sh\n",
		".git/objects/README":    "o\n",
		"src/main.go":            "package main\n",
		"README.md":              "# readme\n",
		".stepseq/reports/s1/.k": "",
	}
	for name, content := range files {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

// hostDir makes a folder outside /tmp, which the sandbox shows as it is.
func hostDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/var/tmp", "stepseq-sandbox-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

// attempts is the bash that tries each write it is given (name and command) and
// says for each whether it was written or refused.
const attempts = `try() { if (eval "$2") 2>/dev/null; then echo "$1: wrote"; else echo "$1: refused"; fi; }
`

// verdicts reads attempts' lines: name → wrote or refused.
func verdicts(out string) map[string]string {
	v := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if name, verdict, ok := strings.Cut(line, ": "); ok && (verdict == "wrote" || verdict == "refused") {
			v[name] = verdict
		}
	}
	return v
}
