package planspec

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
)

// The prompt is data, never code: the original's rule, made whole. An agent's
// argv (STEP_AGENT_CMD, or a plan's list) is refused when what it runs is a
// shell, or when it asks a program to run a word as code: a shell's -c, an
// interpreter's eval flag, awk's or sed's program text. Wrappers that only
// run the rest of their arguments (env, nice, timeout, strace, ld.so, …) are
// looked through. The rule goes by names, as the original's did: a copy of an
// interpreter under a name of its own, or a program that runs code in a way
// this file does not list, passes it. What bounds an agent is --allow-agent,
// and what the agent can reach where it runs.

// ErrAgentRunsCode is matched (errors.Is) by CheckAgentArgv's errors.
var ErrAgentRunsCode = fmt.Errorf("planspec: the agent would run the prompt as code")

// AgentCodeError is why an agent argv is refused: Reason says what would run
// code; the message adds the fix, the same wherever the rule applies.
type AgentCodeError struct {
	Reason string
	// Script is the script a shell was given (bash agent.sh): the fix is to
	// run it itself.
	Script string
	// Env is the environment variable the argv came from (STEP_AGENT_CMD):
	// the fix is written as its value, not as a plan's list.
	Env string
}

func (e *AgentCodeError) Error() string {
	if e.Script != "" {
		name := e.Script
		if !strings.Contains(name, "/") {
			name = "./" + name
		}
		return fmt.Sprintf("%s; stepseq never runs the prompt through a shell or as code: give %s a #! line (#!/bin/sh), make it executable (chmod +x %s) and name it alone: %s",
			e.Reason, e.Script, e.Script, name)
	}
	if e.Env != "" {
		return e.Reason + "; stepseq never runs the prompt through a shell or as code: name your agent's binary instead, like " + e.Env + "='openclaw agent --message'"
	}
	return e.Reason + "; stepseq never runs the prompt through a shell or as code: name your agent's binary instead, like [openclaw, agent, --message]"
}

func (e *AgentCodeError) Unwrap() error { return ErrAgentRunsCode }

// shells are the programs that read their arguments as commands; eval and exec
// are the original's own list, which named shell words too.
var shells = []string{"sh", "bash", "rbash", "dash", "ash", "zsh", "ksh", "mksh", "oksh", "pdksh", "lksh",
	"yash", "posh", "csh", "tcsh", "fish", "pwsh", "powershell", "eval", "exec", "source"}

// wrapper is a program that runs the rest of its arguments as a program. Its
// options are read as getopt reads them: a cluster of short options (-fo FILE)
// ends at the first that takes a value, which is the rest of the word or the
// next one; a long option's value is after = or the next word.
type wrapper struct {
	valued     []string // options whose value is the next word (unless given as -oVALUE or --opt=VALUE)
	optional   string   // short options whose value, if any, is the rest of the word (nsenter -m/proc/1/ns/mnt)
	positional int      // words it reads before the program (timeout's duration, flock's file), options among them
	assigns    bool     // NAME=VALUE words before the program set its environment (env, sudo)
	lone       []string // words that are options though getopt would take them for operands (env's -)
	code       []string // its own options that run a word as a command line
	viaShell   bool     // it hands its command to a shell …
	direct     []string // … unless one of these options is given (watch -x, runuser -u)
}

// wrappers, interpreters and the rest are built when first asked: package-level
// maps would be made at init, in every command.
var wrappers = sync.OnceValue(func() map[string]wrapper {
	m := map[string]wrapper{
		"env": {valued: []string{"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}, assigns: true, lone: []string{"-"},
			code: []string{"-S", "--split-string"}},
		"nice":    {valued: []string{"-n", "--adjustment"}},
		"nohup":   {},
		"timeout": {valued: []string{"-s", "--signal", "-k", "--kill-after"}, positional: 1},
		"stdbuf":  {valued: []string{"-i", "--input", "-o", "--output", "-e", "--error"}},
		"ionice":  {valued: []string{"-c", "--class", "-n", "--classdata", "-p", "--pid", "-P", "--pgid", "-u", "--uid"}},
		"setsid":  {},
		"flock": {valued: []string{"-w", "--wait", "--timeout", "-E", "--conflict-exit-code", "-c", "--command"}, positional: 1,
			code: []string{"-c", "--command"}},
		"busybox": {},
		"time":    {valued: []string{"-f", "--format", "-o", "--output"}},
		"command": {},
		"xargs": {valued: []string{"-a", "--arg-file", "-d", "--delimiter", "-E", "-I", "-L", "--max-lines", "-n", "--max-args",
			"-P", "--max-procs", "-s", "--max-chars", "--process-slot-var"}, optional: "eil"},
		"chrt":    {valued: []string{"-T", "--sched-runtime", "-P", "--sched-period", "-D", "--sched-deadline"}, positional: 1},
		"taskset": {positional: 1},
		"sudo": {valued: []string{"-u", "--user", "-g", "--group", "-C", "--close-from", "-D", "--chdir", "-h", "--host", "-p", "--prompt",
			"-r", "--role", "-t", "--type", "-T", "--command-timeout", "-U", "--other-user"}, assigns: true,
			code: []string{"-s", "--shell", "-i", "--login"}},
		"doas": {valued: []string{"-u", "-C"}, code: []string{"-s"}},
		"unshare": {valued: []string{"-R", "--root", "-w", "--wd", "-S", "--setuid", "-G", "--setgid", "--map-user", "--map-group",
			"--map-users", "--map-groups", "--propagation", "--setgroups", "--monotonic", "--boottime"}},
		"chroot":  {valued: []string{"--userspec", "--groups"}, positional: 1},
		"setarch": {positional: 1}, // setarch ARCH [-R…] PROGRAM: its options come after the architecture
		"setpriv": {valued: []string{"--ambient-caps", "--inh-caps", "--bounding-set", "--ruid", "--euid", "--rgid", "--egid",
			"--reuid", "--regid", "--groups", "--securebits", "--pdeathsig", "--selinux-label", "--apparmor-profile",
			"--landlock-access", "--landlock-rule", "--seccomp-filter"}},
		"prlimit": {valued: []string{"-p", "--pid", "-o", "--output"}, optional: "cdefilmnqrstuvxy"},
		"runuser": {valued: []string{"-u", "--user", "-g", "--group", "-G", "--supp-group", "-w", "--whitelist-environment",
			"-s", "--shell", "-c", "--command", "--session-command"}, lone: []string{"-"},
			code: []string{"-c", "--command", "--session-command"}, viaShell: true, direct: []string{"-u", "--user"}},
		"su": {valued: []string{"-g", "--group", "-G", "--supp-group", "-w", "--whitelist-environment", "-s", "--shell",
			"-c", "--command", "--session-command"}, lone: []string{"-"}, viaShell: true},
		"fakeroot": {valued: []string{"-l", "--lib", "-f", "--faked", "-i", "-s", "-b", "--fd-base"}},
		"strace": {valued: []string{"-a", "-b", "-e", "-E", "-I", "-o", "-O", "-p", "-P", "-s", "-S", "-u", "-U", "-X",
			"--abbrev", "--attach", "--columns", "--const-print-style", "--detach-on", "--env", "--fault", "--inject",
			"--interruptible", "--kvm", "--output", "--raw", "--read", "--signal", "--status", "--string-limit",
			"--summary-columns", "--summary-sort-by", "--summary-syscall-overhead", "--trace", "--trace-path", "--user",
			"--verbose", "--write"}},
		"valgrind": {}, // its own options are all --name=value
		"nsenter": {valued: []string{"-t", "--target", "-S", "--setuid", "-G", "--setgid", "-W", "--wdns", "-N", "--net-socket"},
			optional: "muinpCUTrw"},
		"ld.so": {valued: []string{"--library-path", "--glibc-hwcaps-prepend", "--glibc-hwcaps-mask", "--inhibit-rpath",
			"--audit", "--preload", "--argv0"}},
		"watch": {valued: []string{"-n", "--interval", "-q", "--equexit"}, optional: "d", viaShell: true, direct: []string{"-x", "--exec"}},
	}
	// setarch under the name of an architecture takes none as its first word.
	for _, arch := range []string{"linux32", "linux64", "i386", "x86_64", "uname26"} {
		m[arch] = wrapper{}
	}
	return m
})

// interpreter says how a program takes code in its arguments: by flag (python
// -c, perl -e, node --eval, make --eval), as a module that runs its arguments
// (python -m timeit), or, for awk and sed, as its first operand unless a
// script file is given. always is why a program runs its arguments as code
// whatever its options.
type interpreter struct {
	flags    []string // exact words that make the next word code
	letters  string   // short-option letters that do, also inside a cluster (perl -le)
	modules  []string // modules (-m NAME) that run their arguments as code
	operand  bool     // the first operand is program text …
	fileFlag []string // … unless one of these names a script file
	always   string
}

var interpreters = sync.OnceValue(func() map[string]interpreter {
	python := interpreter{letters: "c", modules: []string{"timeit"}}
	return map[string]interpreter{
		"python":    python,
		"pypy":      python,
		"perl":      {letters: "eE"},
		"ruby":      {letters: "e"},
		"node":      {flags: []string{"--eval", "--print"}, letters: "ep"},
		"nodejs":    {flags: []string{"--eval", "--print"}, letters: "ep"},
		"bun":       {flags: []string{"--eval", "--print"}, letters: "ep"},
		"deno":      {flags: []string{"eval"}},
		"php":       {letters: "rR"},
		"lua":       {letters: "e"},
		"luajit":    {letters: "e"},
		"r":         {letters: "e"},
		"rscript":   {letters: "e"},
		"osascript": {letters: "e"},
		"make":      {flags: []string{"--eval"}, letters: "E"},
		"gmake":     {flags: []string{"--eval"}, letters: "E"},
		"sqlite":    {always: "runs its arguments as SQL and dot-commands, .shell among them"},
		"awk":       {flags: []string{"--source"}, letters: "e", operand: true, fileFlag: []string{"-f", "--file"}},
		"gawk":      {flags: []string{"--source"}, letters: "e", operand: true, fileFlag: []string{"-f", "--file"}},
		"mawk":      {letters: "e", operand: true, fileFlag: []string{"-f"}},
		"nawk":      {letters: "e", operand: true, fileFlag: []string{"-f"}},
		"sed":       {flags: []string{"--expression"}, letters: "e", operand: true, fileFlag: []string{"-f", "--file"}},
		"gsed":      {flags: []string{"--expression"}, letters: "e", operand: true, fileFlag: []string{"-f", "--file"}},
	}
})

// ProgramName is the name the rule knows a program by: its base name, lower
// case, without a version or a platform after one (python3.12 → python, ksh93
// → ksh, perl5.36-x86_64-linux-gnu → perl), and ld.so for the dynamic loader
// under any of its names (ld-linux-x86-64.so.2).
func ProgramName(word string) string {
	base := strings.TrimSuffix(strings.ToLower(path.Base(strings.ReplaceAll(word, "\\", "/"))), ".exe")
	if isLoader(base) {
		return "ld.so"
	}
	n := 0
	for n < len(base) && base[n] >= 'a' && base[n] <= 'z' {
		n++
	}
	if n > 0 && n < len(base) && versionSuffix(base[n:]) {
		return base[:n]
	}
	return base
}

// isLoader reports whether base names the dynamic loader, which runs the
// program named after its options: ld.so, ld-linux-x86-64.so.2, ld-musl-x86_64.so.1.
func isLoader(base string) bool {
	named := strings.HasPrefix(base, "ld-") || strings.HasPrefix(base, "ld.") || strings.HasPrefix(base, "ld64.")
	return named && (strings.HasSuffix(base, ".so") || strings.Contains(base, ".so."))
}

// versionSuffix reports whether s, what follows a name's letters, is a version:
// digits and dots after an optional separator, at most one letter (python3.7m),
// then the end or anything after a separator (5.36-x86_64-linux-gnu). sh2json is
// no sh: its 2 is followed by a word.
func versionSuffix(s string) bool {
	if s[0] == '-' || s[0] == '.' || s[0] == '_' {
		s = s[1:]
	}
	i := 0
	for i < len(s) && (isDigit(s[i]) || i > 0 && s[i] == '.') {
		i++
	}
	if i == 0 {
		return false
	}
	if i < len(s) && isLetter(s[i]) {
		i++
	}
	return i == len(s) || !isDigit(s[i]) && !isLetter(s[i])
}

func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// CheckAgentArgv refuses an agent argv (the prompt not yet appended) that would
// run a word as code: a shell as its program, by name or, with resolve, by what
// the program's path resolves to; behind wrappers such as env, nice, timeout,
// strace or ld.so; a shell flag (-c, -e, or a cluster holding one, as -ec)
// anywhere; an interpreter's eval flag; awk or sed without a script file; a
// wrapper with no program after it, which would run the prompt as one. resolve,
// when not nil, maps a program word to the path it runs (symbolic links
// followed), or "" when it cannot tell; CheckAgentArgv itself does no I/O.
func CheckAgentArgv(argv []string, resolve func(string) string) error {
	if len(argv) == 0 {
		return nil
	}
	if err := checkProgram(argv, resolve); err != nil {
		return err
	}
	for _, w := range argv[1:] {
		if shellFlag(w) {
			return &AgentCodeError{Reason: fmt.Sprintf("%q is a shell flag", w)}
		}
	}
	return nil
}

// checkProgram follows argv through its wrappers to the program it runs, and
// refuses a shell, a wrapper's own way to run a command line, an interpreter
// given code, or no program at all.
func checkProgram(argv []string, resolve func(string) string) error {
	i := 0
	for {
		if err := checkProgramWord(argv, i); err != nil {
			return err
		}
		word := argv[i]
		names := programNames(word, resolve)
		for _, n := range names {
			if slices.Contains(shells, n) {
				return &AgentCodeError{Reason: shellReason(word, n), Script: scriptOf(argv[i+1:])}
			}
		}
		next, nextArgv, wrapped, err := unwrap(argv, i, names)
		if err != nil {
			return err
		}
		if wrapped {
			argv, i = nextArgv, next
			continue
		}
		for _, n := range names {
			if ip, ok := interpreters()[n]; ok {
				if reason := ip.runsCode(word, argv[i+1:]); reason != "" {
					return &AgentCodeError{Reason: reason}
				}
			}
		}
		return nil
	}
}

// checkProgramWord refuses argv[i] as a program: no word left, a placeholder
// the prompt or the changed paths stand in, or a template.
func checkProgramWord(argv []string, i int) error {
	if i >= len(argv) || argv[i] == "{prompt}" || argv[i] == "{changed}" {
		prev := "the agent"
		if i > 0 {
			prev = fmt.Sprintf("%q", argv[i-1])
		}
		return &AgentCodeError{Reason: prev + " would run the prompt as its program"}
	}
	if word := argv[i]; HasTemplate(word) {
		return fmt.Errorf("%q: a ${…} template may not stand for the program: write the program in the plan, and templates in its arguments, like [claude, --model, \"${params.model}\"]", word)
	}
	return nil
}

// programNames are the names a program word goes by: the rule's name for it, its
// base name when that differs (linux64, which names a wrapper), and the rule's
// name for the file it resolves to. A busybox reached through another name runs
// the applet of that name.
func programNames(word string, resolve func(string) string) []string {
	names := []string{ProgramName(word)}
	if base := strings.ToLower(path.Base(word)); base != names[0] {
		names = append(names, base)
	}
	if resolve != nil {
		if real := resolve(word); real != "" {
			if rn := ProgramName(real); !slices.Contains(names, rn) && (rn != "busybox" || names[0] == "busybox") {
				names = append(names, rn)
			}
		}
	}
	return names
}

// unwrap steps over the wrapper at argv[i] (env, nice, timeout…) to the word of
// the program it runs, in argv or, for capsh, in the argv it makes; wrapped is
// false when argv[i] is no wrapper. A wrapper's own option that runs a command
// line, or one that hands its command to a shell, is refused.
func unwrap(argv []string, i int, names []string) (next int, nextArgv []string, wrapped bool, err error) {
	for _, n := range names {
		if n == "capsh" {
			if out, ok := capshProgram(argv, i); ok {
				return 0, out, true, nil
			}
			return 0, nil, false, nil
		}
		wr, ok := wrappers()[n]
		if !ok {
			continue
		}
		opts, prog := wr.parse(argv, i)
		for _, o := range opts {
			if slices.Contains(wr.code, o.name) {
				return 0, nil, false, &AgentCodeError{Reason: fmt.Sprintf("%q %s runs a command line", argv[i], o.word)}
			}
		}
		if wr.viaShell && !slices.ContainsFunc(opts, func(o option) bool { return slices.Contains(wr.direct, o.name) }) {
			reason := fmt.Sprintf("%q hands its command to a shell", argv[i])
			if len(wr.direct) > 0 {
				reason += " without " + wr.direct[0]
			}
			return 0, nil, false, &AgentCodeError{Reason: reason}
		}
		return prog, argv, true, nil
	}
	return 0, nil, false, nil
}

// option is one of a wrapper's options as parse met it: its name (-o, --output)
// and the word that held it.
type option struct{ name, word string }

// parse reads the options and positional words of the wrapper at argv[i] as
// getopt would, and returns the options met and the index of the program (past
// the end when none is left).
func (wr wrapper) parse(argv []string, i int) (opts []option, prog int) {
	j, pos := i+1, wr.positional
	for j < len(argv) {
		w := argv[j]
		switch {
		case w == "--":
			return opts, j + 1 + pos
		case slices.Contains(wr.lone, w):
			opts = append(opts, option{w, w})
			j++
		case strings.HasPrefix(w, "--"):
			name, _, attached := strings.Cut(w, "=")
			opts = append(opts, option{name, w})
			j++
			if !attached && slices.Contains(wr.valued, name) {
				j++
			}
		case len(w) > 1 && w[0] == '-':
			var takesNext bool
			opts, takesNext = wr.cluster(w, opts)
			j++
			if takesNext {
				j++
			}
		case wr.assigns && strings.Contains(w, "=") && !strings.HasPrefix(w, "="):
			j++ // NAME=VALUE
		case pos > 0:
			pos--
			j++
		default:
			return opts, j
		}
	}
	return opts, j
}

// cluster adds the short options in w (-fo, -n1024) to opts, and reports
// whether the last of them takes the next word as its value.
func (wr wrapper) cluster(w string, opts []option) ([]option, bool) {
	for k := 1; k < len(w); k++ {
		name := "-" + w[k:k+1]
		opts = append(opts, option{name, w})
		switch {
		case slices.Contains(wr.valued, name):
			return opts, k == len(w)-1
		case strings.IndexByte(wr.optional, w[k]) >= 0:
			return opts, false
		}
	}
	return opts, false
}

// capshProgram is the argv capsh runs after -- (or -+): the shell --shell
// names, /bin/bash by default, with the words after it; after == (or =+),
// capsh itself again. ok is false when capsh runs nothing.
func capshProgram(argv []string, i int) (out []string, ok bool) {
	shell := "/bin/bash"
	for j := i + 1; j < len(argv); j++ {
		switch w := argv[j]; {
		case strings.HasPrefix(w, "--shell="):
			shell = strings.TrimPrefix(w, "--shell=")
		case w == "--" || w == "-+":
			return append([]string{shell}, argv[j+1:]...), true
		case w == "==" || w == "=+":
			return append([]string{argv[i]}, argv[j+1:]...), true
		}
	}
	return nil, false
}

func shellReason(word, name string) string {
	if ProgramName(word) == name {
		return fmt.Sprintf("%q is a shell", word)
	}
	return fmt.Sprintf("%q is a shell (it runs %s)", word, name)
}

// shellFlag is -c or -e, alone or in a cluster of short options (-ec, -xc, -Ic).
func shellFlag(w string) bool {
	if len(w) < 2 || w[0] != '-' || w[1] == '-' {
		return false
	}
	letters := w[1:]
	for _, r := range letters {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return strings.ContainsAny(letters, "ce")
}

// flagIs reports whether w is one of flags, also as --flag=VALUE or -fVALUE.
func flagIs(w string, flags []string) bool {
	for _, f := range flags {
		switch {
		case w == f:
			return true
		case strings.HasPrefix(f, "--") && strings.HasPrefix(w, f+"="):
			return true
		case len(f) == 2 && f[0] == '-' && f[1] != '-' && strings.HasPrefix(w, f) && len(w) > 2:
			return true
		}
	}
	return false
}

// runsCode says why args make the interpreter word run code, or "".
func (ip interpreter) runsCode(word string, args []string) string {
	if ip.always != "" {
		return fmt.Sprintf("%q %s", word, ip.always)
	}
	file := false
	for k, a := range args {
		if flagIs(a, ip.flags) {
			return fmt.Sprintf("%q %s runs its argument as code", word, a)
		}
		if ip.evalLetter(a) {
			return fmt.Sprintf("%q %s runs its argument as code", word, a)
		}
		if len(ip.modules) > 0 && slices.Contains(ip.modules, module(args, k)) {
			return fmt.Sprintf("%q -m %s runs its arguments as code", word, module(args, k))
		}
		if flagIs(a, ip.fileFlag) {
			file = true
		}
	}
	if ip.operand && !file {
		return fmt.Sprintf("%q runs its first argument as a program: give it a script file (-f FILE)", word)
	}
	return ""
}

// evalLetter reports whether a is a cluster of short options holding an eval
// letter, which takes the rest as its code: perl -le, python -Sc.
func (ip interpreter) evalLetter(a string) bool {
	if ip.letters == "" || len(a) < 2 || a[0] != '-' || a[1] == '-' {
		return false
	}
	for j := 1; j < len(a) && isLetter(a[j]); j++ {
		if strings.IndexByte(ip.letters, a[j]) >= 0 {
			return true
		}
	}
	return false
}

// module is the module args[k] names with -m (-m NAME, -mNAME, or ending a
// cluster, -Im NAME), or "".
func module(args []string, k int) string {
	a := args[k]
	if len(a) < 2 || a[0] != '-' || a[1] == '-' {
		return ""
	}
	for j := 1; j < len(a) && isLetter(a[j]); j++ {
		if a[j] != 'm' {
			continue
		}
		if rest := a[j+1:]; rest != "" {
			return rest
		}
		if k+1 < len(args) {
			return args[k+1]
		}
		return ""
	}
	return ""
}

// scriptOf is the script file a shell's arguments name first (bash agent.sh),
// "" when they start with an option or name none.
func scriptOf(args []string) string {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") || strings.ContainsAny(args[0], " \t") {
		return ""
	}
	return args[0]
}
