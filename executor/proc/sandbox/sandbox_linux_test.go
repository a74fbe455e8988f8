package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestCommand_WritesOnlyWhereAllowed runs an agent that tries to write everywhere
// in and around its workspace, before and after stepseq makes and replaces run
// files, as the process's own user and as the other kind (root or not). At the
// workspace's top it changes files in place, and can neither make, remove nor
// replace (sed -i) an entry.
func TestCommand_WritesOnlyWhereAllowed(t *testing.T) {
	for _, r := range runners() {
		t.Run(r.name, func(t *testing.T) {
			ws, write, preset, outside := workspace(t), hostDir(t), hostDir(t), hostDir(t)
			token := strconv.FormatInt(time.Now().UnixNano(), 36)
			// Were the sandbox to leak, its writes outside would stay behind.
			t.Cleanup(func() { os.Remove("/etc/stepseq-sandbox-" + token); os.Remove("/tmp/agent-" + token) })
			reports := filepath.Join(ws, ".stepseq/reports/s1")
			spec := Spec{Workspace: ws, ReportDir: reports, Write: []string{write},
				PresetDirs: []string{filepath.Join(preset, ".agent")}, Network: true,
				BaseEnv: []string{"WS=" + ws, "R=" + reports, "W=" + write, "P=" + filepath.Join(preset, ".agent"),
					"OUT=" + outside, "TOKEN=" + token}}
			r.own(t, ws, write, preset, outside)
			s := r.start(t, spec, attempts+`
try src-new 'echo x > "$WS/src/new.go"'
try src-deep 'mkdir -p "$WS/src/a/b" && echo x > "$WS/src/a/b/c"'
try top-file-in-place 'echo x >> "$WS/README.md"'
try src-replace 'sed -i s/main/app/ "$WS/src/main.go"'
try top-file-replace 'sed -i s/readme/notes/ "$WS/README.md"'
try report 'echo r > "$R/1.json"'
try write-path 'echo w > "$W/out"'
try preset 'echo p > "$P/config.json"'
try private-tmp 'echo t > "/tmp/agent-$TOKEN"'
try git-objects 'echo o > "$WS/.git/objects/new"'
try outside 'echo x > "$OUT/f"'
try etc 'echo x > "/etc/stepseq-sandbox-$TOKEN"'
try top-new 'echo x > "$WS/notes.md"'
try top-mkdir 'mkdir "$WS/paper"'
try top-remove 'rm "$WS/README.md"'
try state 'echo x >> "$WS/state.json"'
try state-new 'echo "{}" > "$WS/state.new.json"'
try state-other 'echo x >> "$WS/state.fix.json"'
try stepseq 'echo x >> "$WS/.stepseq/journal"'
try stepseq-new 'echo x > "$WS/.stepseq/new"'
try plans 'echo x >> "$WS/plans/p.yaml"'
try plans-new 'echo x > "$WS/plans/q.yaml"'
try git-hook 'echo x > "$WS/.git/hooks/post-commit"'
try git-config 'echo x >> "$WS/.git/config"'
try remount 'mount -o remount,rw,bind "$WS" && echo x >> "$WS/state.json"'
grep CapEff /proc/self/status
echo > "$R/ready"
for i in $(seq 600); do [ -e "$WS/src/go" ] && break; sleep 0.05; done
try state-replaced 'echo x >> "$WS/state.json"'
try state-later 'echo x >> "$WS/state.later.json"'
try plans-later 'echo x >> "$WS/plans/later.yaml"'
try top-later 'echo x >> "$WS/later.md"'
`)
			s.waitFor(filepath.Join(reports, "ready"))
			// While the agent runs, stepseq replaces state.json (a new file renamed
			// onto it) and a run starts; a plan and a file at the top appear.
			for name, content := range map[string]string{"state.later.json": "{}", "plans/later.yaml": "name: later\n", "later.md": "later\n", ".state.json.tmp": `{"replaced":true}`} {
				if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Rename(filepath.Join(ws, ".state.json.tmp"), filepath.Join(ws, "state.json")); err != nil {
				t.Fatal(err)
			}
			r.own(t, ws)
			if err := os.WriteFile(filepath.Join(ws, "src/go"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			out, code := s.wait()
			if code != 0 {
				t.Fatalf("exit %d: %s", code, out)
			}
			got := verdicts(out)
			for _, name := range []string{"src-new", "src-deep", "top-file-in-place", "src-replace", "report", "write-path", "preset", "private-tmp", "git-objects"} {
				if got[name] != "wrote" {
					t.Errorf("%s: %s, want wrote", name, got[name])
				}
			}
			for _, name := range []string{"outside", "etc", "top-new", "top-mkdir", "top-remove", "top-file-replace", "state", "state-new", "state-other",
				"stepseq", "stepseq-new", "plans", "plans-new", "git-hook", "git-config", "remount",
				"state-replaced", "state-later", "plans-later", "top-later"} {
				if got[name] != "refused" {
					t.Errorf("%s: %s, want refused", name, got[name])
				}
			}
			if !strings.Contains(out, "CapEff:\t0000000000000000") {
				t.Errorf("the agent has capabilities: %s", out)
			}
			if b, err := os.ReadFile(filepath.Join(ws, "state.json")); err != nil || string(b) != `{"replaced":true}` {
				t.Errorf("state.json = %q, %v; want stepseq's", b, err)
			}
			if b, err := os.ReadFile(filepath.Join(ws, "src/new.go")); err != nil || string(b) != "x\n" {
				t.Errorf("src/new.go = %q, %v", b, err)
			}
			if _, err := os.Stat("/tmp/agent-" + token); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the agent's /tmp is the host's: %v", err)
			}
			if fi, err := os.Stat(filepath.Join(preset, ".agent")); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("the preset folder was not made private: %v %v", fi, err)
			}
		})
	}
}

// TestCommand_Worktree: with a worktree the agent writes its worktree, even
// where it lies in .stepseq, but for its protected paths; the workspace is
// read-only as a whole.
func TestCommand_Worktree(t *testing.T) {
	for _, r := range runners() {
		t.Run(r.name, func(t *testing.T) {
			ws := workspace(t)
			wt := filepath.Join(ws, ".stepseq/worktrees/s1")
			for _, p := range []string{"plans/p.yaml", "src/main.go"} {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(wt, p)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(wt, p), []byte("x\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			reports := filepath.Join(ws, ".stepseq/reports/s1")
			r.own(t, ws)
			out, code := r.run(t, Spec{Workspace: ws, Worktree: wt, ReportDir: reports,
				BaseEnv: []string{"WS=" + ws, "WT=" + wt, "R=" + reports}}, attempts+`
echo "cwd: $(pwd)"
try wt-new 'echo x > "$WT/notes.md"'
try wt-mkdir 'mkdir -p "$WT/paper" && echo x > "$WT/paper/draft.md"'
try wt-src 'echo x >> "$WT/src/main.go"'
try wt-remove 'rm "$WT/src/main.go"'
try report 'echo r > "$R/1.json"'
try wt-plans 'echo x >> "$WT/plans/p.yaml"'
try ws-src 'echo x > "$WS/src/new.go"'
try ws-top-file 'echo x >> "$WS/README.md"'
try ws-new 'echo x > "$WS/notes.md"'
try ws-state 'echo x >> "$WS/state.json"'
try ws-git 'echo x > "$WS/.git/objects/new"'
`)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, out)
			}
			if !strings.Contains(out, "cwd: "+wt+"\n") {
				t.Errorf("the agent does not start in its worktree: %s", out)
			}
			got := verdicts(out)
			for _, name := range []string{"wt-new", "wt-mkdir", "wt-src", "wt-remove", "report"} {
				if got[name] != "wrote" {
					t.Errorf("%s: %s, want wrote", name, got[name])
				}
			}
			for _, name := range []string{"wt-plans", "ws-src", "ws-top-file", "ws-new", "ws-state", "ws-git"} {
				if got[name] != "refused" {
					t.Errorf("%s: %s, want refused", name, got[name])
				}
			}
		})
	}
}

// TestCommand_ProtectedLink: a protected path that is a link keeps what it points
// to read-only, even inside a folder the agent writes.
func TestCommand_ProtectedLink(t *testing.T) {
	ws := workspace(t)
	if err := os.Rename(filepath.Join(ws, "plans"), filepath.Join(ws, "src/plans")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("src/plans", filepath.Join(ws, "plans")); err != nil {
		t.Fatal(err)
	}
	out, code := self().run(t, Spec{Workspace: ws, BaseEnv: []string{"WS=" + ws}}, attempts+`
try src 'echo x > "$WS/src/new.go"'
try link 'echo x > "$WS/plans/q.yaml"'
try target 'echo x >> "$WS/src/plans/p.yaml"'
`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	if got := verdicts(out); got["src"] != "wrote" || got["link"] != "refused" || got["target"] != "refused" {
		t.Fatalf("got %v, want src wrote, link and target refused", got)
	}
}

// TestCommand_PrivateTmp: the agent's /tmp is its own, and a workspace under the
// host's /tmp stays in sight.
func TestCommand_PrivateTmp(t *testing.T) {
	ws := workspace(t)
	host, err := os.CreateTemp("/tmp", "stepseq-host-")
	if err != nil {
		t.Fatal(err)
	}
	host.Close()
	t.Cleanup(func() { os.Remove(host.Name()) })
	out, code := self().run(t, Spec{Workspace: ws, BaseEnv: []string{"WS=" + ws, "HOSTFILE=" + host.Name()}}, `
[ -e "$HOSTFILE" ] && echo "host file: seen" || echo "host file: hidden"
[ -f "$WS/README.md" ] && echo "workspace: seen" || echo "workspace: hidden"
echo x > /tmp/mine && echo "tmp: writable"
`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	for _, want := range []string{"host file: hidden", "workspace: seen", "tmp: writable"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in %s", want, out)
		}
	}
}

// TestCommand_Network: without the network the agent cannot reach a port on the
// host's loopback; with it, it can.
func TestCommand_Network(t *testing.T) {
	for _, r := range runners() {
		for _, network := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/network=%v", r.name, network), func(t *testing.T) {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				defer ln.Close()
				accepted := make(chan string, 1)
				go func() {
					c, err := ln.Accept()
					if err != nil {
						accepted <- "error: " + err.Error()
						return
					}
					defer c.Close()
					_ = c.SetDeadline(time.Now().Add(30 * time.Second))
					b, _ := io.ReadAll(c)
					accepted <- string(b)
				}()
				ws := workspace(t)
				r.own(t, ws)
				port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
				out, code := r.run(t, Spec{Workspace: ws, Network: network, BaseEnv: []string{"PORT=" + port}},
					`exec 3<>"/dev/tcp/127.0.0.1/$PORT" && echo hello >&3`)
				if !network {
					if code == 0 {
						t.Fatalf("the agent reached the host's port without the network: %s", out)
					}
					// Its try is over: a connection it had made would be waiting.
					_ = ln.(*net.TCPListener).SetDeadline(time.Now())
					if got := <-accepted; !strings.Contains(got, "timeout") {
						t.Fatalf("the listener took %q", got)
					}
					return
				}
				if code != 0 {
					t.Fatalf("exit %d: %s", code, out)
				}
				if got := <-accepted; got != "hello\n" {
					t.Fatalf("the listener got %q", got)
				}
			})
		}
	}
}

// TestCommand_Environment: the agent sees what stepseq sets, the essentials and
// the names it was given, and no other variable of stepseq's, anywhere in its
// sandbox; no value is written in bwrap's arguments, which anyone can read.
func TestCommand_Environment(t *testing.T) {
	for _, r := range runners() {
		t.Run(r.name, func(t *testing.T) {
			secret := "hidden-" + strconv.FormatInt(time.Now().UnixNano(), 36)
			given := "given-" + strconv.FormatInt(time.Now().UnixNano(), 36)
			step := "step-" + strconv.FormatInt(time.Now().UnixNano(), 36)
			t.Setenv("STEPSEQ_SANDBOX_SECRET", secret)
			t.Setenv("STEPSEQ_SANDBOX_GIVEN", given)
			t.Setenv("TMPDIR", "/var/tmp")
			ws := workspace(t)
			r.own(t, ws)
			s := r.start(t, Spec{Workspace: ws, Env: []string{"STEPSEQ_SANDBOX_GIVEN"},
				BaseEnv: []string{"STEPSEQ_STEP=" + step}}, `env; cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n'`)
			out, code := s.wait()
			if code != 0 {
				t.Fatalf("exit %d: %s", code, out)
			}
			if strings.Contains(out, secret) {
				t.Errorf("the agent sees a variable it was not given: %s", out)
			}
			for _, want := range []string{"STEPSEQ_SANDBOX_GIVEN=" + given, "STEPSEQ_STEP=" + step, "PATH=" + os.Getenv("PATH"), "TMPDIR=/tmp"} {
				if !strings.Contains(out, want+"\n") {
					t.Errorf("want %s in the agent's environment: %s", want, out)
				}
			}
			if args := strings.Join(s.argv, " "); strings.Contains(args, given) || strings.Contains(args, step) {
				t.Errorf("a value is in bwrap's arguments: %s", args)
			}
		})
	}
}

// TestCommand_DiesWithLauncher: when the process that started the sandbox is
// killed, nothing in the sandbox outlives it.
func TestCommand_DiesWithLauncher(t *testing.T) {
	ws := workspace(t)
	token := "stepseq-sandbox-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	argv, env, err := Command(Spec{Workspace: ws, Argv: []string{"bash", "-c",
		`sleep 1000 & echo > "$WS/src/ready"; wait # ` + token}, BaseEnv: []string{"WS=" + ws}})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(argv)
	e, _ := json.Marshal(env)
	launcher := exec.Command(os.Args[0])
	launcher.Env = append(os.Environ(), helperVar+"=launch", "STEPSEQ_SANDBOX_ARGV="+string(a), "STEPSEQ_SANDBOX_ENV="+string(e))
	launcher.Stderr = os.Stderr
	if err := launcher.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = launcher.Process.Kill(); _ = launcher.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		if _, err := os.Stat(filepath.Join(ws, "src/ready")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sandboxed agent did not start")
		}
		time.Sleep(pause)
	}
	// bwrap, the sandbox's init, the agent: each holds the token in its command line.
	if n := len(holding(token)); n < 3 {
		t.Fatalf("%d processes of the sandbox found, want bwrap, its init and the agent", n)
	}
	if err := launcher.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if left := waitGone(token, 10*time.Second); len(left) > 0 {
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		t.Fatalf("processes %v of the sandbox outlived its launcher", left)
	}
}

// TestCommand_GroupSignal: the launcher's SIGTERM to the sandbox's process group
// reaches the agent, which has its grace (bwrap does not end and take it down);
// its exit status comes out of bwrap. SIGKILL ends the sandbox whatever the
// agent does.
func TestCommand_GroupSignal(t *testing.T) {
	ws := workspace(t)
	r := self()
	s := r.start(t, Spec{Workspace: ws, BaseEnv: []string{"WS=" + ws}},
		`trap 'sleep 0.3; echo > "$WS/src/term"; exit 7' TERM; echo > "$WS/src/ready"; while :; do sleep 0.05; done`)
	s.waitFor(filepath.Join(ws, "src/ready"))
	if err := syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if out, code := s.wait(); code != 7 {
		t.Fatalf("exit %d, want the agent's 7: %s", code, out)
	}
	if _, err := os.Stat(filepath.Join(ws, "src/term")); err != nil {
		t.Fatalf("the agent's handler of SIGTERM did not finish: %v", err)
	}

	token := "stepseq-sandbox-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	s = r.start(t, Spec{Workspace: ws, BaseEnv: []string{"WS=" + ws}},
		`trap '' TERM; sleep 1000 & echo > "$WS/src/deaf"; wait; wait # `+token)
	s.waitFor(filepath.Join(ws, "src/deaf"))
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	s.wait()
	if left := waitGone(token, 10*time.Second); len(left) > 0 {
		t.Fatalf("processes %v of the sandbox outlived SIGKILL to its group", left)
	}
}

// TestCommand_InheritedDescriptor: a descriptor the launcher hands the agent (the
// try lock) reaches it through the sandbox.
func TestCommand_InheritedDescriptor(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	s := self().start(t, Spec{Workspace: workspace(t)}, `echo through >&3`, pw)
	pw.Close()
	got, err := io.ReadAll(pr)
	if err != nil || string(got) != "through\n" {
		t.Fatalf("read %q, %v from the agent's descriptor 3", got, err)
	}
	if out, code := s.wait(); code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
}

// TestCommand_NoBwrap: without bwrap there is no sandbox, and the error says how
// to install it.
func TestCommand_NoBwrap(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	spec := Spec{Workspace: workspace(t), Argv: []string{"true"}}
	_, _, err := Command(spec)
	if !errors.Is(err, ErrNoBwrap) || err.Error() != "sandbox: bwrap not found: apt-get install bubblewrap" {
		t.Fatalf("Command: %v", err)
	}
	if err := Probe(context.Background(), spec); !errors.Is(err, ErrNoBwrap) {
		t.Fatalf("Probe: %v", err)
	}
}

// TestProbe: a sandbox that can be had probes clean; one whose bwrap is refused
// user namespaces fails the probe with the reason and the setting to change.
func TestProbe(t *testing.T) {
	ws := workspace(t)
	if err := Probe(context.Background(), Spec{Workspace: ws}); err != nil {
		t.Fatal(err)
	}
	// A helper in a user namespace of its own, as a user that is not root in it:
	// what it sets there holds for the namespaces under it, and for no one else.
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperVar+"=no-namespaces", "STEPSEQ_SANDBOX_WS="+ws)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 1000, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 1000, HostID: os.Getgid(), Size: 1}},
		AmbientCaps: []uintptr{unix.CAP_SYS_RESOURCE},
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the probe without user namespaces: %v: %s", err, out)
	}
	t.Logf("the probe says: %s", out)
	for _, want := range []string{ErrNoNamespaces.Error(), "bwrap: ", "sysctl -w user.max_user_namespaces="} {
		if !strings.Contains(string(out), want) {
			t.Errorf("want %q in %s", want, out)
		}
	}
}
