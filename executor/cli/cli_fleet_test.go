package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// fleetServer is a JetStream server on a random loopback port, for --nats.
func fleetServer(t *testing.T) string {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: t.TempDir(), JetStreamMaxMemory: 64 << 20, JetStreamMaxStore: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(s.Shutdown)
	return s.ClientURL()
}

// fleetRepo is a bare repository with a commit on main.
func fleetRepo(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	bare, seed := filepath.Join(root, "remote.git"), filepath.Join(root, "seed")
	for _, args := range [][]string{
		{"init", "--quiet", "--bare", "--initial-branch=main", bare},
		{"init", "--quiet", "--initial-branch=main", seed},
		{"-C", seed, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "--allow-empty", "-m", "start"},
		{"-C", seed, "push", "--quiet", bare, "main"},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return bare
}

// stepseq runs the command line in this process: its exit code and output.
func stepseq(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	err := run(context.Background(), append(args, "--log-level", "error"), &out, &errb)
	return exitCode(err, &errb), out.String(), errb.String()
}

// TestFleetCLI_SubmitRunsClose: a run submitted is listed by runs --nats,
// as text and JSON, and close --nats closes it while it waits.
func TestFleetCLI_SubmitRunsClose(t *testing.T) {
	url, bare := fleetServer(t), fleetRepo(t)
	plan := filepath.Join(t.TempDir(), "review.yaml")
	if err := os.WriteFile(plan, []byte("params:\n  ticket: {type: string}\nsteps:\n  - id: a\n    title: a\n    instruction: go\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := stepseq("submit", "--nats", url, plan, "--repo", bare, "--param", "ticket=T-1", "--run", "t1")
	if code != 0 || !strings.Contains(out, "queued run t1: plan review") || !strings.Contains(out, "stepseq/t1") {
		t.Fatalf("submit: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = stepseq("runs", "--nats", url)
	if code != 0 || !strings.Contains(out, "RUN") || !regexpLine(out, `t1\s+review\s+queued`) {
		t.Fatalf("runs --nats: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = stepseq("runs", "--nats", url, "--json")
	var runs []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &runs) != nil || len(runs) != 1 || runs[0]["status"] != "queued" || runs[0]["state"] != nil {
		t.Fatalf("runs --nats --json: exit %d\n%s", code, out)
	}
	code, out, errs = stepseq("close", "--nats", url, "t1")
	if code != 0 || !strings.Contains(out, "closed run t1") {
		t.Fatalf("close --nats: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = stepseq("runs", "--nats", url, "--status", "closed")
	if code != 0 || !regexpLine(out, `t1\s+review\s+closed: closed by stepseq close`) {
		t.Fatalf("runs --nats --status closed: exit %d\n%s", code, out)
	}
	code, _, errs = stepseq("retry", "--nats", url, "--run", "t1", "a")
	if code != 1 || !strings.Contains(errs, "t1 is closed") {
		t.Fatalf("retry --nats of a closed run: exit %d, %s", code, errs)
	}
}

// TestFleetCLI_BadInput: each mistake says its cause, with the documented exit
// code, and queues nothing.
func TestFleetCLI_BadInput(t *testing.T) {
	url, bare := fleetServer(t), fleetRepo(t)
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte("steps:\n  - id: a\n    title: a\n    instruction: go\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("steps:\n  - id: a\n    titel: a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nobody := fmt.Sprintf("nats://%s", l.Addr())
	l.Close()
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unreachable", []string{"submit", "--nats", nobody, good, "--repo", bare}, 2, "the NATS server is unreachable: " + nobody},
		{"not git", []string{"submit", "--nats", url, good, "--repo", dir}, 1, "does not appear to be a git repository"},
		{"no branch", []string{"submit", "--nats", url, good, "--repo", bare, "--branch", "dev"}, 1, `no branch "dev"`},
		{"bad plan", []string{"submit", "--nats", url, bad, "--repo", bare}, 1, "bad.yaml:3:"},
		{"unknown param", []string{"submit", "--nats", url, good, "--repo", bare, "--param", "x=1"}, 1, "params.x: unknown param"},
		{"no repo", []string{"submit", "--nats", url, good}, 2, "--repo"},
		{"no url", []string{"submit", good, "--repo", bare}, 2, "--nats"},
		{"runs status", []string{"runs", "--nats", url, "--status", "active"}, 2, "with --nats, want one of queued"},
		{"runs unreachable", []string{"runs", "--nats", nobody}, 2, "unreachable"},
		{"close no run", []string{"close", "--nats", url, "nope"}, 1, `no such run "nope"`},
		{"retry no run flag", []string{"retry", "--nats", url, "a"}, 2, "--run"},
		{"worker max runs", []string{"worker", "--nats", url, "--workdir", dir, "--max-runs", "0"}, 2, "--max-runs 0"},
		{"worker no workdir", []string{"worker", "--nats", url}, 2, "--workdir"},
		{"worker unreachable", []string{"worker", "--nats", nobody, "--workdir", dir}, 2, "unreachable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := stepseq(tc.args...)
			if code != tc.code || !strings.Contains(out+errs, tc.want) {
				t.Fatalf("exit %d, want %d saying %q\n%s%s", code, tc.code, tc.want, out, errs)
			}
		})
	}
	code, out, _ := stepseq("runs", "--nats", url, "--json")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("runs after bad input: exit %d, %s; want none", code, out)
	}
}

func regexpLine(text, pattern string) bool {
	for _, line := range strings.Split(text, "\n") {
		if regexp.MustCompile(pattern).MatchString(line) {
			return true
		}
	}
	return false
}

// TestFleetCLI_Worker: stepseq worker runs a submitted plan to its end, and
// tells each transition to --notify-command as watch does, the fleet's run
// named in it.
func TestFleetCLI_Worker(t *testing.T) {
	t.Setenv("STEP_AGENT_CMD", "true")
	url, bare := fleetServer(t), fleetRepo(t)
	dir := t.TempDir()
	plan, notes := filepath.Join(dir, "two.yaml"), filepath.Join(dir, "notes.jsonl")
	if err := os.WriteFile(plan, []byte("steps:\n  - id: a\n    title: a\n    instruction: go\n  - id: b\n    title: b\n    instruction: go\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"worker", "--nats", url, "--workdir", filepath.Join(dir, "runs"), "--lease", "5s",
			"--name", "w1", "--notify-command", "tee -a " + notes, "--log-level", "error"}, io.Discard, io.Discard)
	}()
	if code, out, errs := stepseq("submit", "--nats", url, plan, "--repo", bare, "--run", "two"); code != 0 {
		t.Fatalf("submit: exit %d\n%s%s", code, out, errs)
	}
	waitFor(t, "the run done", func() bool {
		_, out, _ := stepseq("runs", "--nats", url, "--status", "done")
		return regexpLine(out, `two\s+two\s+done\s+w1\s`)
	})
	waitFor(t, "the plan's end told", func() bool {
		data, _ := os.ReadFile(notes)
		return strings.Contains(string(data), `"run":"two"`) && strings.Contains(string(data), `"status":"done"`)
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("worker: %v", err)
	}
}
