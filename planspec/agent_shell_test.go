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
		// Agents that run a binary.
		{[]string{"openclaw", "agent", "--message"}, ""},
		{[]string{"./mytool", "--prompt", "{prompt}"}, ""},
		{[]string{"env", "FOO=1", "openclaw", "agent"}, ""},
		{[]string{"timeout", "30m", "nice", "-n", "5", "claude", "-p"}, ""},
		{[]string{"python3", "agent.py"}, ""},
		{[]string{"python3", "-m", "myagent"}, ""},
		{[]string{"awk", "-f", "prog.awk"}, ""},
		{[]string{"node", "agent.js", "--model", "x"}, ""},
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
