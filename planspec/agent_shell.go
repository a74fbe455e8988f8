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
// run the rest of their arguments (env, nice, timeout, …) are looked through.

// ErrAgentRunsCode is matched (errors.Is) by CheckAgentArgv's errors.
var ErrAgentRunsCode = fmt.Errorf("planspec: the agent would run the prompt as code")

// AgentCodeError is why an agent argv is refused: Reason says what would run
// code; the message adds the fix, the same wherever the rule applies.
type AgentCodeError struct{ Reason string }

func (e *AgentCodeError) Error() string {
	return e.Reason + "; stepseq never runs the prompt through a shell or as code: name your agent's binary instead, like [openclaw, agent, --message]"
}

func (e *AgentCodeError) Unwrap() error { return ErrAgentRunsCode }

// shells are the programs that read their arguments as commands; eval and exec
// are the original's own list, which named shell words too.
var shells = []string{"sh", "bash", "rbash", "dash", "ash", "zsh", "ksh", "mksh", "oksh", "pdksh", "lksh",
	"yash", "posh", "csh", "tcsh", "fish", "pwsh", "powershell", "eval", "exec", "source"}

// wrapper is a program that runs the rest of its arguments as a program: its
// options that take a value, and the positional words it reads before the
// program (timeout's duration, flock's file).
type wrapper struct {
	valued     []string // options whose value is the next word (unless given as -oVALUE or --opt=VALUE)
	positional int
}

// wrappers, wrapperCodeFlags and interpreters are built when first asked:
// package-level maps would be made at init, in every command.
var wrappers = sync.OnceValue(func() map[string]wrapper {
	return map[string]wrapper{
		"env":     {valued: []string{"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}},
		"nice":    {valued: []string{"-n", "--adjustment"}},
		"nohup":   {},
		"timeout": {valued: []string{"-s", "--signal", "-k", "--kill-after"}, positional: 1},
		"stdbuf":  {valued: []string{"-i", "--input", "-o", "--output", "-e", "--error"}},
		"ionice":  {valued: []string{"-c", "--class", "-n", "--classdata", "-p", "--pid", "-P", "--pgid", "-u", "--uid"}},
		"setsid":  {},
		"flock":   {valued: []string{"-w", "--timeout", "-E", "--conflict-exit-code", "-c", "--command"}, positional: 1},
		"busybox": {},
		"time":    {valued: []string{"-f", "--format", "-o", "--output"}},
		"command": {},
		"xargs":   {valued: []string{"-a", "--arg-file", "-d", "--delimiter", "-E", "-I", "-L", "-n", "--max-args", "-P", "--max-procs", "-s"}},
		"chrt":    {positional: 1},
		"taskset": {positional: 1},
		"sudo":    {valued: []string{"-u", "--user", "-g", "--group", "-C", "-D", "--chdir", "-h", "--host", "-p", "--prompt", "-r", "-t", "-U"}},
		"doas":    {valued: []string{"-u", "-C"}},
		"unshare": {},
		"chroot":  {positional: 1},
	}
})

// wrapperCodeFlags are a wrapper's own options that run a word as a command.
var wrapperCodeFlags = sync.OnceValue(func() map[string][]string {
	return map[string][]string{
		"env":   {"-S", "--split-string"},
		"flock": {"-c", "--command"},
		"sudo":  {"-s", "--shell", "-i", "--login"},
	}
})

// interpreter says how a program takes code in its arguments: by flag (python
// -c, perl -e, node --eval), or, for awk and sed, as its first operand unless
// a script file is given.
type interpreter struct {
	flags    []string // exact words that make the next word code
	letters  string   // short-option letters that do, also inside a cluster (perl -le)
	operand  bool     // the first operand is program text …
	fileFlag []string // … unless one of these names a script file
}

var interpreters = sync.OnceValue(func() map[string]interpreter {
	return map[string]interpreter{
		"python":    {letters: "c"},
		"pypy":      {letters: "c"},
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
		"awk":       {flags: []string{"--source"}, letters: "e", operand: true, fileFlag: []string{"-f", "--file"}},
		"gawk":      {flags: []string{"--source"}, letters: "e", operand: true, fileFlag: []string{"-f", "--file"}},
		"mawk":      {letters: "e", operand: true, fileFlag: []string{"-f"}},
		"nawk":      {letters: "e", operand: true, fileFlag: []string{"-f"}},
		"sed":       {flags: []string{"--expression"}, letters: "e", operand: true, fileFlag: []string{"-f", "--file"}},
		"gsed":      {flags: []string{"--expression"}, letters: "e", operand: true, fileFlag: []string{"-f", "--file"}},
	}
})

// ProgramName is the name the rule knows a program by: its base name, lower
// case, without a version (python3.12 → python, ksh93 → ksh, lua5.4 → lua).
func ProgramName(word string) string {
	base := strings.ToLower(path.Base(strings.ReplaceAll(word, "\\", "/")))
	trimmed := strings.TrimRight(base, "0123456789.-")
	if trimmed == "" {
		return base
	}
	return trimmed
}

// CheckAgentArgv refuses an agent argv (the prompt not yet appended) that would
// run a word as code: a shell as its program, by name or, with resolve, by what
// the program's path resolves to; behind wrappers such as env, nice, timeout or
// busybox; a shell flag (-c, -e, or a cluster holding one, as -ec) anywhere;
// an interpreter's eval flag; awk or sed without a script file; a wrapper with
// no program after it, which would run the prompt as one. resolve, when not
// nil, maps a program word to the path it runs (symbolic links followed), or ""
// when it cannot tell; CheckAgentArgv itself does no I/O.
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
				return &AgentCodeError{Reason: shellReason(word, n)}
			}
		}
		next, wrapped, err := unwrap(argv, i, names)
		if err != nil {
			return err
		}
		if wrapped {
			i = next
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

// programNames are the names a program word goes by: its own, and the one of the
// file it resolves to when that differs. A busybox reached through another name
// runs the applet of that name.
func programNames(word string, resolve func(string) string) []string {
	names := []string{ProgramName(word)}
	if resolve != nil {
		if real := resolve(word); real != "" {
			if rn := ProgramName(real); rn != names[0] {
				names = append(names, rn)
			}
		}
	}
	if len(names) == 2 && names[1] == "busybox" {
		names = names[:1]
	}
	return names
}

// unwrap steps over the wrapper at argv[i] (env, nice, timeout…) to the word of
// the program it runs; wrapped is false when argv[i] is no wrapper. A wrapper's
// own flag that runs a command line is refused.
func unwrap(argv []string, i int, names []string) (next int, wrapped bool, err error) {
	for _, n := range names {
		wr, ok := wrappers()[n]
		if !ok {
			continue
		}
		for _, f := range argv[i+1:] {
			if flagIs(f, wrapperCodeFlags()[n]) {
				return 0, false, &AgentCodeError{Reason: fmt.Sprintf("%q %s runs a command line", argv[i], f)}
			}
		}
		return skipWrapper(argv, i, wr), true, nil
	}
	return 0, false, nil
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

// skipWrapper is the index of the program that the wrapper at argv[i] runs.
func skipWrapper(argv []string, i int, wr wrapper) int {
	j := i + 1
	for j < len(argv) {
		w := argv[j]
		switch {
		case w == "--":
			j++
			return j + wr.positional
		case strings.HasPrefix(w, "-") && len(w) > 1:
			j++
			if slices.Contains(wr.valued, w) {
				j++ // the option's value
			}
		case strings.Contains(w, "=") && !strings.HasPrefix(w, "="):
			j++ // env's NAME=VALUE
		default:
			return j + wr.positional
		}
	}
	return j
}

// runsCode says why args make the interpreter word run code, or "".
func (ip interpreter) runsCode(word string, args []string) string {
	file := false
	for _, a := range args {
		if flagIs(a, ip.flags) {
			return fmt.Sprintf("%q %s runs its argument as code", word, a)
		}
		if ip.letters != "" && len(a) > 1 && a[0] == '-' && a[1] != '-' {
			// In a cluster, the eval letter takes the rest: perl -le, python -Sc.
			for _, r := range a[1:] {
				if strings.ContainsRune(ip.letters, r) {
					return fmt.Sprintf("%q %s runs its argument as code", word, a)
				}
				if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
					break
				}
			}
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
