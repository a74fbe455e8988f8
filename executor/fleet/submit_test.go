package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stepseq/stepseq/planspec/plan"
)

// TestDial_Unreachable: no server at the URL is ErrUnreachable, naming it.
func TestDial_Unreachable(t *testing.T) {
	url := fmt.Sprintf("nats://127.0.0.1:%d", freePort(t))
	_, err := Dial(context.Background(), url, Options{Timeout: 500 * time.Millisecond})
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), url) {
		t.Fatalf("err %v, want ErrUnreachable naming %s", err, url)
	}
}

// TestDial_OtherSettings: a stream or bucket of the fleet's names made with
// settings that could lose runs is refused, the settings named, and left
// as it was.
func TestDial_OtherSettings(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		make func(jetstream.JetStream) error
		want []string
	}{
		{"stream with limits retention", func(js jetstream.JetStream) error {
			_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: Stream, Subjects: []string{"other.>"}, MaxAge: time.Hour})
			return err
		}, []string{"retention Limits", "subjects [other.>]", "max age 1h0m0s"}},
		{"bucket with a ttl", func(js jetstream.JetStream) error {
			_, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: Bucket, TTL: time.Minute})
			return err
		}, []string{"keeps values for 1m0s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t)
			raw := rawJetStream(t, s.ClientURL())
			if err := tc.make(raw); err != nil {
				t.Fatal(err)
			}
			_, err := Dial(ctx, s.ClientURL(), Options{})
			if !errors.Is(err, ErrSettings) {
				t.Fatalf("err %v, want ErrSettings", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err %q does not name %q", err, w)
				}
			}
			if _, err := raw.Stream(ctx, Stream); tc.name[:6] == "stream" && err != nil {
				t.Errorf("the stream was removed: %v", err)
			}
		})
	}
}

// TestWorker_OtherLease: a worker whose --lease is not the fleet's is refused,
// both named.
func TestWorker_OtherLease(t *testing.T) {
	s := startServer(t)
	inProcessWorker(t, s.ClientURL(), "w1", 3*time.Second, 1)
	c := dial(t, s.ClientURL(), 1)
	_, err := NewWorker(context.Background(), c, WorkerOptions{Workdir: t.TempDir(), Lease: 5 * time.Second})
	if !errors.Is(err, ErrSettings) || !strings.Contains(err.Error(), "3s") || !strings.Contains(err.Error(), "5s") {
		t.Fatalf("err %v, want ErrSettings naming 3s and 5s", err)
	}
}

// TestSubmit_BadInput: what is wrong is said, and nothing is queued.
func TestSubmit_BadInput(t *testing.T) {
	s := startServer(t)
	c := dial(t, s.ClientURL(), 1)
	bare := bareRepo(t)
	notGit := t.TempDir()
	params := []byte("name: p\nparams:\n  n: {type: integer}\nsteps:\n  - id: a\n    title: a\n    instruction: go\n")
	for _, tc := range []struct {
		name string
		sub  Submission
		is   error
		want string
	}{
		{"not a git repository", Submission{Plan: planOf("x", "write:a"), Repo: notGit}, ErrRepo, "does not appear to be a git repository"},
		{"no such repository", Submission{Plan: planOf("x", "write:a"), Repo: filepath.Join(notGit, "nope")}, ErrRepo, "nope"},
		{"no such branch", Submission{Plan: planOf("x", "write:a"), Repo: bare, Branch: "dev"}, ErrRepo, `no branch "dev" (it has main)`},
		{"param missing", Submission{Plan: params, Repo: bare}, nil, "params.n: required"},
		{"param of the wrong type", Submission{Plan: params, Repo: bare, Params: map[string]any{"n": "three"}}, nil, "params.n"},
		{"not a plan", Submission{Plan: []byte("steps: 3\n"), Repo: bare}, nil, "plan.yaml:1"},
		{"bad run name", Submission{Plan: planOf("x", "write:a"), Repo: bare, Run: "a/b"}, nil, `'/' is not allowed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.sub.File == "" {
				tc.sub.File = "plan.yaml"
			}
			_, err := Submit(context.Background(), c, tc.sub)
			if err == nil || tc.is != nil && !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one saying %q", err, tc.want)
			}
		})
	}
	if runs, err := List(context.Background(), c); err != nil || len(runs) != 0 {
		t.Fatalf("runs %v (%v), want none", runs, err)
	}
	info, err := c.Stream.Info(context.Background())
	if err != nil || info.State.Msgs != 0 {
		t.Fatalf("queue %+v (%v), want empty", info, err)
	}
	submit(t, c, Submission{Plan: planOf("x", "write:a"), Repo: bare, Run: "taken"})
	_, err = Submit(context.Background(), c, Submission{Plan: planOf("x", "write:a"), File: "p.yaml", Repo: bare, Run: "taken"})
	if !errors.Is(err, ErrRunExists) {
		t.Fatalf("err %v, want ErrRunExists", err)
	}
	var pe *plan.ParamsError
	_, err = Submit(context.Background(), c, Submission{Plan: params, File: "p.yaml", Repo: bare})
	if !errors.As(err, &pe) {
		t.Fatalf("err %v, want a *plan.ParamsError", err)
	}
}

// TestWorker_PushRejected: a remote that refuses the run's branch blocks the
// run with git's reason before any agent works; the message is acked, the
// record says why.
func TestWorker_PushRejected(t *testing.T) {
	agentEnv(t)
	s := startServer(t)
	bare := bareRepo(t)
	hook := filepath.Join(bare, "hooks", "pre-receive")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\necho 'branches are frozen' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := dial(t, s.ClientURL(), 1)
	stamps := filepath.Join(t.TempDir(), "stamps")
	submit(t, c, Submission{Plan: planOf("frozen", "stamp:"+stamps), Repo: bare, Run: "frozen"})
	inProcessWorker(t, s.ClientURL(), "w1", 3*time.Second, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec, err := WaitEnded(ctx, c, "frozen")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != StatusBlocked || !strings.Contains(rec.Reason, "branches are frozen") || !strings.Contains(rec.Reason, "push") {
		t.Fatalf("record %s: %q, want blocked with the hook's reason", rec.Status, rec.Reason)
	}
	if _, err := os.Stat(stamps); err == nil {
		t.Error("an agent ran for a run whose branch cannot be pushed")
	}
	waitFor(t, 10*time.Second, "the message acked", func() bool {
		info, err := c.Stream.Info(context.Background())
		return err == nil && info.State.Msgs == 0
	})
}

// TestWorker_Workdir: a workdir that cannot be written is said at start.
func TestWorker_Workdir(t *testing.T) {
	s := startServer(t)
	c := dial(t, s.ClientURL(), 1)
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := NewWorker(context.Background(), c, WorkerOptions{Workdir: filepath.Join(file, "runs")})
	if err == nil || !strings.Contains(err.Error(), "--workdir") {
		t.Fatalf("err %v, want one naming --workdir", err)
	}
}

// TestProduct_LinksNoServer: the product's binary links the NATS client,
// never the server, which only the tests embed.
func TestProduct_LinksNoServer(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/stepseq/stepseq").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := string(out)
	if !strings.Contains(deps, "github.com/nats-io/nats.go/jetstream\n") {
		t.Error("the product does not link the NATS client: is the fleet wired?")
	}
	if strings.Contains(deps, "nats-server") {
		t.Error("the product links the NATS server")
	}
}
