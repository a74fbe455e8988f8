package cli

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// freeAddr finds a loopback port nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	// On an address of 127.0.0.0/8 of its own, not 127.0.0.1: a port freed
	// on 127.0.0.1 is soon another test's, whose listener takes port 0 there.
	// macOS answers on 127.0.0.1 alone: there it is 127.0.0.1.
	ip := fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(254), rand.IntN(256), 1+rand.IntN(254))
	if ln, err := net.Listen("tcp", ip+":0"); err == nil {
		defer ln.Close()
		return ln.Addr().String()
	}
	return freeAddrOn(t, "127.0.0.1")
}

// freeAddrOn finds a port of ip nothing listens on.
func freeAddrOn(t *testing.T, ip string) string {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func get(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// TestWatch_HealthAndMetrics runs the sidecar in process with --listen and checks
// the probes and the Prometheus series a Kubernetes deployment relies on.
func TestWatch_HealthAndMetrics(t *testing.T) {
	dir := t.TempDir()
	plan := "steps:\n  - id: gated\n    title: Gated\n    instruction: write:out.txt\n    when: exists(\"go.txt\")\n"
	if err := os.MkdirAll(filepath.Join(dir, "plans"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plans", "p.yaml"), []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	t.Setenv("STEP_AGENT_CMD", "true")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"watch", "--listen", addr, "--log-level", "error", dir}, io.Discard, io.Discard)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watch: %v", err)
		}
	}()

	deadline := time.Now().Add(effectWait)
	for {
		code, _, err := get("http://" + addr + "/readyz")
		if err == nil && code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never answered 200 (last %d, %v)", code, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if code, _, err := get("http://" + addr + "/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("/healthz = %d %v, want 200", code, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for {
		_, body, err := get("http://" + addr + "/metrics")
		// The step's DONE and the plan's may come in two writes: a scrape
		// between them sees one without the other.
		if err == nil && strings.Contains(body, "stepseq_launches_total 1") && strings.Contains(body, `stepseq_steps{status="DONE"} 1`) &&
			strings.Contains(body, `stepseq_plan_status{status="done"} 1`) {
			for _, series := range []string{"stepseq_gate_latency_seconds_bucket", "stepseq_watcher_events_total", "stepseq_watches ", "stepseq_failures_total 0", "stepseq_retries_total 0", "stepseq_watcher_overflows_total 0",
				`stepseq_steps{status="PENDING"} 0`, `stepseq_steps{status="IN_PROGRESS"} 0`, `stepseq_plan_status{status="done"} 1`,
				"process_cpu_seconds_total ", "process_resident_memory_bytes ", "go_goroutines "} {
				if !strings.Contains(body, series) {
					t.Errorf("/metrics lacks %s", series)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics never showed the launch:\n%s", body)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWatch_MetricsTimeRetriedTries: a try that fails and is retried at once is
// timed like any other. Its FAILED record is written together with the retry's
// launch, so timing tries from the state files left it out: failures_total 2
// against count{outcome="failed"} 1.
func TestWatch_MetricsTimeRetriedTries(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	agent := filepath.Join(dir, "flaky-agent")
	script := "#!/bin/sh\n[ \"$STEPSEQ_TRY\" -ge 3 ] && exit 0\necho \"try $STEPSEQ_TRY fails on purpose\" >&2\nexit 1\n"
	if err := os.WriteFile(agent, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	plan := "agent: [" + agent + "]\nmaxRetries: 3\nsteps:\n  - id: flaky\n    title: Flaky\n    instruction: fail twice\n"
	if err := os.MkdirAll(filepath.Join(dir, "plans"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plans", "p.yaml"), []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"watch", "--listen", addr, "--log-level", "error", dir}, io.Discard, io.Discard)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watch: %v", err)
		}
	}()
	waitFor(t, "the plan's end on /metrics", func() bool {
		_, body, err := get("http://" + addr + "/metrics")
		return err == nil && strings.Contains(body, `stepseq_plan_status{status="done"} 1`)
	})
	// A scrape reads each series at its own moment: the one that saw the plan
	// DONE may have read the failures before the tries ran. One begun after
	// it counts every try, since a try is counted before the write of its end.
	_, body, err := get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, series := range []string{"stepseq_failures_total 2", `stepseq_step_duration_seconds_count{outcome="failed"} 2`,
		`stepseq_step_duration_seconds_count{outcome="done"} 1`, "stepseq_launches_total 3", "stepseq_running_agents 0"} {
		if !strings.Contains(body, series+"\n") {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}
