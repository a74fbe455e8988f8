// Package sandbox confines an agent with bubblewrap (bwrap) on Linux: it turns a
// Spec (what the step may write, read, see of the environment and whether it has
// the network) into the command line that runs the agent inside the sandbox, and
// tells why a sandbox cannot be had. It launches nothing but Probe's test run and
// knows nothing of plans, runs or the engine; starting, signalling and waiting for
// the command stay with the launcher.
//
// Inside, the whole filesystem is read-only except what the Spec makes writable; /tmp
// and /dev/shm are private; the agent has new PID and IPC namespaces (and an
// empty network namespace without the network), no capabilities, only the
// environment the Spec passes, and it dies with its launcher.
package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
)

// DefaultProtected are the paths in the step's folder that stay read-only in every
// sandbox: stepseq's own folder, the run files, the plans (an agent that could
// write them could start work outside the sandbox), and git's hooks and config,
// which name commands that git runs outside the sandbox.
var DefaultProtected = []string{".stepseq", "state.json", "state.*.json", "plans", ".git/hooks", ".git/config"}

// Essential are the variables a sandboxed agent gets from stepseq's environment
// without being named: a program cannot run without a PATH, a HOME and its locale.
var Essential = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM"}

var (
	// ErrNoBwrap is returned when bubblewrap is not installed.
	ErrNoBwrap = errors.New("sandbox: bwrap not found: apt-get install bubblewrap")
	// ErrNoNamespaces is returned by Probe when bwrap is installed but the system
	// refuses it the namespaces it needs; the error names the fix.
	ErrNoNamespaces = errors.New("sandbox: bwrap cannot make its namespaces")
	// ErrUnsupported is returned on a system without a sandbox: only Linux has one.
	ErrUnsupported = errors.New("sandbox: agents are sandboxed with bubblewrap, on Linux only")
)

// Spec is what one sandboxed agent may do. Paths may start with ~/ (the home
// folder); relative ones are taken from the step's folder (the worktree if there is
// one, else the workspace). Folders that must be writable and do not exist yet are
// made by Command.
type Spec struct {
	// Workspace is the workspace folder. Without a Worktree the agent writes in it,
	// except the protected paths; at its top it can change the files that exist but
	// not make, remove or rename entries, since the top holds the run files that
	// stepseq makes and replaces while the agent runs.
	Workspace string
	// Worktree, when set, is the step's own checkout, writable except the protected
	// paths in it; the workspace is then read-only as a whole.
	Worktree string
	// ReportDir is the step's report folder: writable, even inside .stepseq.
	ReportDir string
	// Write are more writable folders or files (a cache, a declared output's folder).
	Write []string
	// Read are paths to show read-only where the sandbox would hide them (under /tmp).
	Read []string
	// Env names the variables passed from stepseq's environment, beyond Essential.
	Env []string
	// Network keeps the host's network; without it the agent has an empty network
	// namespace (not even the host's loopback).
	Network bool
	// PresetDirs are the agent CLI's own config folders (~/.claude, ~/.codex):
	// writable, made (private) when missing.
	PresetDirs []string
	// Protected are patterns (path.Match, relative to the step's folder) kept
	// read-only beyond DefaultProtected, which always apply.
	Protected []string
	// Argv is the agent's command.
	Argv []string
	// BaseEnv is what stepseq sets (NAME=VALUE): its STEPSEQ_* variables.
	BaseEnv []string
}

// Command returns the command line and the environment that run spec.Argv in the
// sandbox. The launcher must start argv with exactly env (not added to its own:
// nothing else may reach the agent) and in a session of its own (SysProcAttr): the
// sandbox is then its process group, so that a signal to the group reaches the
// agent, and the agent has no terminal to type into.
//
// The agent's environment goes by the environment, never by bwrap's arguments,
// which every user of the machine can read in /proc. A signal to the group reaches
// the agent, which has the grace it would have unsandboxed: bwrap itself ignores
// SIGTERM (were it to end, the sandbox would be killed at once), and ends with the
// agent, whose exit status it returns (128+N for a signal N); SIGKILL ends it and
// everything in the sandbox. The sandbox dies with the thread that started it
// (Linux's parent-death signal follows the thread): it must not be started by a
// goroutine locked to its thread (runtime.LockOSThread) that then ends.
func Command(spec Spec) (argv, env []string, err error) {
	if runtime.GOOS != "linux" {
		return nil, nil, fmt.Errorf("%w (not on %s)", ErrUnsupported, runtime.GOOS)
	}
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return nil, nil, errors.New("sandbox: empty command")
	}
	if strings.Contains(spec.Argv[0], "=") {
		// env(1), which starts the agent, would take it for a variable.
		return nil, nil, fmt.Errorf("sandbox: command %q: a program's name cannot hold '='", spec.Argv[0])
	}
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, nil, ErrNoBwrap
	}
	envPath, err := exec.LookPath("env")
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: env not found (GNU coreutils): %w", err)
	}
	env, err = environment(spec)
	if err != nil {
		return nil, nil, err
	}
	l, err := plan(spec)
	if err != nil {
		return nil, nil, err
	}
	argv = []string{envPath, "--ignore-signal=TERM", bwrap,
		"--die-with-parent", "--unshare-pid", "--unshare-ipc"}
	if !spec.Network {
		argv = append(argv, "--unshare-net")
	}
	// As root bwrap keeps every capability, with which the agent could mount the
	// read-only paths again writable; without root it gives none anyway.
	argv = append(argv, "--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc")
	for _, m := range l.mounts {
		argv = append(argv, m.args()...)
	}
	argv = append(argv, "--chdir", l.dir, "--", envPath, "--default-signal=TERM", "--")
	return append(argv, spec.Argv...), env, nil
}

// SysProcAttr is how the launcher starts Command's argv: in a session of its own,
// which is also a process group whose id is bwrap's pid. bwrap's --new-session
// would move the agent out of that group, where the launcher's signals no longer
// reach it.
func SysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

// environment is the agent's whole environment: Essential and spec.Env as stepseq
// has them, then spec.BaseEnv, and TMPDIR on the private /tmp (a TMPDIR outside
// it would be read-only) unless BaseEnv sets one.
func environment(spec Spec) ([]string, error) {
	var names []string
	vals := map[string]string{}
	set := func(name, val string) {
		if _, ok := vals[name]; !ok {
			names = append(names, name)
		}
		vals[name] = val
	}
	for _, name := range append(slices.Clone(Essential), spec.Env...) {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			return nil, fmt.Errorf("sandbox: env %q: not a variable's name", name)
		}
		if v, ok := os.LookupEnv(name); ok {
			set(name, v)
		}
	}
	set("TMPDIR", "/tmp")
	for _, kv := range spec.BaseEnv {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("sandbox: base env %q: not NAME=VALUE", kv)
		}
		set(name, val)
	}
	env := make([]string, 0, len(names))
	for _, name := range names {
		env = append(env, name+"="+vals[name])
	}
	return env, nil
}

// expand makes p absolute: ~/ from the home folder, a relative path from dir.
func expand(p, dir string) (string, error) {
	switch {
	case p == "":
		return "", errors.New("empty path")
	case p == "~" || strings.HasPrefix(p, "~/"):
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		return filepath.Join(home, p[1:]), nil
	case filepath.IsAbs(p):
		return filepath.Clean(p), nil
	}
	return filepath.Join(dir, p), nil
}
