package planspec

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckAgentArgv: each argv that would run the prompt, or a word of its
// own, as code is refused with the one message; agents that run a binary pass.
func TestCheckAgentArgv(t *testing.T) {
	links := map[string]string{ // what resolve says, as the executor's would
		"./agent":         "/usr/bin/dash",
		"/opt/bin/runner": "/bin/busybox",
		"./mytool":        "/usr/local/bin/mytool",
		"./py":            "/usr/bin/python3.12",
	}
	resolve := func(w string) string { return links[w] }
	for _, tc := range []struct {
		argv   []string
		reason string // "" passes
	}{
		// The trial's fourteen, and their kin.
		{[]string{"bash"}, `"bash" is a shell`},
		{[]string{"rbash"}, `"rbash" is a shell`},
		{[]string{"/bin/sh"}, `"/bin/sh" is a shell`},
		{[]string{"env", "sh"}, `"sh" is a shell`},
		{[]string{"env", "-i", "PATH=/bin", "sh"}, `"sh" is a shell`},
		{[]string{"nice", "bash"}, `"bash" is a shell`},
		{[]string{"nice", "-n", "10", "zsh"}, `"zsh" is a shell`},
		{[]string{"nohup", "dash"}, `"dash" is a shell`},
		{[]string{"timeout", "5", "sh"}, `"sh" is a shell`},
		{[]string{"timeout", "-k", "2", "5", "ksh"}, `"ksh" is a shell`},
		{[]string{"stdbuf", "-oL", "bash"}, `"bash" is a shell`},
		{[]string{"ionice", "-n", "7", "sh"}, `"sh" is a shell`},
		{[]string{"setsid", "sh"}, `"sh" is a shell`},
		{[]string{"flock", "/tmp/l", "bash"}, `"bash" is a shell`},
		{[]string{"flock", "/tmp/l", "-c"}, `"flock" -c runs a command line`},
		{[]string{"busybox", "sh"}, `"sh" is a shell`},
		{[]string{"nice", "env", "timeout", "5", "sh"}, `"sh" is a shell`},
		{[]string{"./agent"}, `"./agent" is a shell (it runs dash)`},
		{[]string{"env", "./agent"}, `"./agent" is a shell (it runs dash)`},
		{[]string{"mytool", "-c"}, `"-c" is a shell flag`},
		{[]string{"sh", "-c"}, `"sh" is a shell`},
		{[]string{"mytool", "-e"}, `"-e" is a shell flag`},
		{[]string{"mytool", "-ec"}, `"-ec" is a shell flag`},
		{[]string{"mytool", "-xc"}, `"-xc" is a shell flag`},
		{[]string{"mytool", "-Ic"}, `"-Ic" is a shell flag`},
		{[]string{"python3", "-c", "import sys; exec(sys.argv[1])"}, `"python3" -c runs its argument as code`},
		{[]string{"python3.12", "-Sc"}, `"python3.12" -Sc runs its argument as code`},
		{[]string{"./py", "-Sc"}, `"./py" -Sc runs its argument as code`},
		{[]string{"perl", "-e"}, `"perl" -e runs its argument as code`},
		{[]string{"perl", "-E"}, `"perl" -E runs its argument as code`},
		{[]string{"perl", "-le"}, `"perl" -le runs its argument as code`},
		{[]string{"perl", "-nE"}, `"perl" -nE runs its argument as code`},
		{[]string{"node", "-e"}, `"node" -e runs its argument as code`},
		{[]string{"node", "-p"}, `"node" -p runs its argument as code`},
		{[]string{"node", "--eval"}, `"node" --eval runs its argument as code`},
		{[]string{"node", "--print=1"}, `"node" --print=1 runs its argument as code`},
		{[]string{"php", "-r"}, `"php" -r runs its argument as code`},
		{[]string{"awk"}, `"awk" runs its first argument as a program: give it a script file (-f FILE)`},
		{[]string{"gawk", "-v", "x=1"}, `"gawk" runs its first argument as a program`},
		{[]string{"env", "sed"}, `"sed" runs its first argument as a program`},
		{[]string{"env"}, `"env" would run the prompt as its program`},
		{[]string{"timeout", "5", "{prompt}"}, `"5" would run the prompt as its program`},
		{[]string{"{prompt}"}, `the agent would run the prompt as its program`},
		{[]string{"env", "-S", "mytool --x"}, `"env" -S runs a command line`},
		{[]string{"sudo", "-s"}, `"sudo" -s runs a command line`},
		{[]string{"/opt/bin/runner"}, ""}, // busybox under another name runs that applet: none here
		// Programs that run the prompt as code by an option of their own.
		{[]string{"python3", "-m", "timeit"}, `"python3" -m timeit runs its arguments as code`},
		{[]string{"python3", "-mtimeit"}, `"python3" -m timeit runs its arguments as code`},
		{[]string{"python3.11", "-Im", "timeit"}, `"python3.11" -m timeit runs its arguments as code`},
		{[]string{"./py", "-m", "timeit"}, `"./py" -m timeit runs its arguments as code`},
		{[]string{"make", "--eval"}, `"make" --eval runs its argument as code`},
		{[]string{"make", "--eval=$(shell id)"}, `"make" --eval=$(shell id) runs its argument as code`},
		{[]string{"gmake", "-sE"}, `"gmake" -sE runs its argument as code`},
		{[]string{"sqlite3", "notes.db"}, `"sqlite3" runs its arguments as SQL and dot-commands, .shell among them`},
		{[]string{"sqlite3", "-cmd"}, `"sqlite3" runs its arguments as SQL`},
		{[]string{"watch", "-n", "1"}, `"watch" hands its command to a shell without -x`},
		{[]string{"watch", "-x", "perl", "-E"}, `"perl" -E runs its argument as code`},
		{[]string{"runuser", "nobody"}, `"runuser" hands its command to a shell without -u`},
		{[]string{"su", "nobody"}, `"su" hands its command to a shell`},
		{[]string{"runuser", "-u", "nobody", "-s", "/bin/sh", "--command", "x"}, `"runuser" --command runs a command line`},
		{[]string{"sudo", "-Es"}, `"sudo" -Es runs a command line`},
		{[]string{"doas", "-s"}, `"doas" -s runs a command line`},
		{[]string{"env", "-vS", "perl -E"}, `"env" -vS runs a command line`},
		// perl -E behind the wrappers that run their argument, their own
		// options read as they read them.
		{[]string{"setarch", "x86_64", "perl", "-E"}, `"perl" -E runs its argument as code`},
		{[]string{"setarch", "x86_64", "-R", "--addr-compat-layout", "perl", "-E"}, `"perl" -E runs its argument as code`},
		{[]string{"linux64", "-R", "perl", "-E"}, `"perl" -E runs its argument as code`},
		{[]string{"setpriv", "--reuid", "1000", "--nnp", "perl", "-E"}, `"perl" -E runs its argument as code`},
		{[]string{"prlimit", "--nofile=64", "-n64", "perl", "-E"}, `"perl" -E runs its argument as code`},
		{[]string{"prlimit", "-o", "RESOURCE", "perl", "-E"}, `"perl" -E runs its argument as code`},
		{[]string{"runuser", "-u", "nobody", "--", "perl", "-E"}, `"perl" -E runs its argument as code`},
		{[]string{"runuser", "-unobody", "perl", "-E"}, `"perl" -E runs its argument as code`},
		{[]string{"fakeroot", "perl", "-E"}, `"perl" -E runs its argument as code`},
		{[]string{"fakeroot", "-s", "saved", "--", "perl", "-E"}, `"perl" -E runs its argument as code`},
		{[]string{"strace", "-f", "-o", "/dev/null", "perl", "-E"}, `"perl" -E runs its argument as code`},
		{[]string{"strace", "-fo", "/dev/null", "--string-limit", "64", "perl", "-E"}, `"perl" -E runs its argument as code`},
		{[]string{"valgrind", "--tool=none", "-q", "perl", "-E"}, `"perl" -E runs its argument as code`},
		{[]string{"nsenter", "-t", "1", "-m", "perl", "-E"}, `"perl" -E runs its argument as code`},
		{[]string{"nsenter", "-m/proc/1/ns/mnt", "perl", "-E"}, `"perl" -E runs its argument as code`},
		{[]string{"unshare", "-r", "--propagation", "private", "perl", "-E"}, `"perl" -E runs its argument as code`},
		{[]string{"/lib64/ld-linux-x86-64.so.2", "/usr/bin/perl", "-E"}, `"/usr/bin/perl" -E runs its argument as code`},
		{[]string{"/lib/ld-musl-x86_64.so.1", "--library-path", "/lib", "perl", "-E"}, `"perl" -E runs its argument as code`},
		{[]string{"ld.so", "--argv0", "claude", "perl", "-E"}, `"perl" -E runs its argument as code`},
		{[]string{"capsh", "--shell=perl", "--", "-E"}, `"perl" -E runs its argument as code`},
		{[]string{"capsh", "--caps=", "==", "--shell=/usr/bin/perl", "--", "-E"}, `"/usr/bin/perl" -E runs its argument as code`},
		{[]string{"capsh", "--"}, `"/bin/bash" is a shell`},
		{[]string{"timeout", "--foreground", "5", "strace", "-f", "nice", "perl", "-E"}, `"perl" -E runs its argument as code`},
		// Interpreters by their versioned names, hard links among them (Debian's
		// perl5.36.0 is one of perl): the rule goes by the name.
		{[]string{"perl5.36-x86_64-linux-gnu", "-E"}, `"perl5.36-x86_64-linux-gnu" -E runs its argument as code`},
		{[]string{"/usr/bin/perl5.36.0", "-E"}, `"/usr/bin/perl5.36.0" -E runs its argument as code`},
		{[]string{"python3.11", "-c"}, `"python3.11" -c runs its argument as code`},
		{[]string{"python3.7m", "-c"}, `"python3.7m" -c runs its argument as code`},
		{[]string{"luajit-2.1.0-beta3", "-e"}, `"luajit-2.1.0-beta3" -e runs its argument as code`},
		{[]string{"ruby3.1", "-e"}, `"ruby3.1" -e runs its argument as code`},
		{[]string{"zsh-5.9"}, `"zsh-5.9" is a shell`},
		// Agents that run a binary.
		{[]string{"openclaw", "agent", "--message"}, ""},
		{[]string{"./mytool", "--prompt", "{prompt}"}, ""},
		{[]string{"env", "FOO=1", "openclaw", "agent"}, ""},
		{[]string{"timeout", "30m", "nice", "-n", "5", "claude", "-p"}, ""},
		{[]string{"python3", "agent.py"}, ""},
		{[]string{"python3", "-m", "myagent"}, ""},
		{[]string{"awk", "-f", "prog.awk"}, ""},
		{[]string{"node", "agent.js", "--model", "x"}, ""},
		{[]string{"python3", "-m", "myagent.timeit"}, ""},
		{[]string{"make", "-f", "agent.mk", "run"}, ""},
		{[]string{"watch", "-n", "60", "-x", "claude", "-p"}, ""},
		{[]string{"runuser", "-u", "agent", "claude"}, ""},
		{[]string{"strace", "-o", "trace.txt", "claude"}, ""},
		{[]string{"nsenter", "-t", "1", "-m", "claude"}, ""},
		{[]string{"setarch", "x86_64", "-R", "claude"}, ""},
		{[]string{"ld.so", "--library-path", "/opt/lib", "/opt/bin/agent"}, ""},
		{[]string{"capsh", "--drop=cap_sys_admin", "--shell=/usr/bin/claude", "--", "-p"}, ""},
		{[]string{"sh2json", "--in"}, ""},           // a name that starts like a shell's
		{[]string{"node-agent", "--port", "1"}, ""}, // or an interpreter's
	} {
		t.Run(strings.Join(tc.argv, " "), func(t *testing.T) {
			err := CheckAgentArgv(tc.argv, resolve)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("passed; want refused: %s", tc.reason)
			}
			if !errors.Is(err, ErrAgentRunsCode) || !strings.HasPrefix(err.Error(), tc.reason) ||
				!strings.HasSuffix(err.Error(), "; stepseq never runs the prompt through a shell or as code: name your agent's binary instead, like [openclaw, agent, --message]") {
				t.Fatalf("err = %v, want it to start %q and end with the rule's fix", err, tc.reason)
			}
		})
	}
}
