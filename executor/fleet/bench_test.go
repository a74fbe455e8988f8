package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The fleet's figures, run by make bench once each (-benchtime 1x): each
// times many events inside and reports them as metrics.

func stampTimes(b *testing.B, path string) []time.Time {
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	var out []time.Time
	for _, f := range strings.Fields(string(data)) {
		ns, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, time.Unix(0, ns))
	}
	return out
}

func setAgent(b *testing.B, cmd string) {
	b.Helper()
	old, had := os.LookupEnv("STEP_AGENT_CMD")
	os.Setenv("STEP_AGENT_CMD", cmd)
	b.Cleanup(func() {
		if had {
			os.Setenv("STEP_AGENT_CMD", old)
		} else {
			os.Unsetenv("STEP_AGENT_CMD")
		}
	})
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// BenchmarkFleet_SubmitToAgentStart: from the start of a submit to the agent's
// start on an idle worker: the submit's checks (git ls-remote), the queue, the
// lease taken, the clone, the first push and the launch.
func BenchmarkFleet_SubmitToAgentStart(b *testing.B) {
	setAgent(b, fakeAgentPath)
	s := startServer(b)
	bare := bareRepo(b)
	c := dial(b, s.ClientURL(), 1)
	inProcessWorker(b, s.ClientURL(), "w1", DefaultLease, 1)
	stamps := filepath.Join(b.TempDir(), "stamps")
	const runs = 20
	var took []time.Duration
	for b.Loop() {
		took = took[:0]
		_ = os.Remove(stamps)
		for i := range runs {
			run := fmt.Sprintf("start-%d-%d", i, time.Now().UnixNano())
			begin := time.Now()
			submit(b, c, Submission{Repo: bare, Run: run, Plan: planOf("start", "stamp:"+stamps)})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if _, err := WaitEnded(ctx, c, run); err != nil {
				b.Fatal(err)
			}
			cancel()
			st := stampTimes(b, stamps)
			took = append(took, st[len(st)-1].Sub(begin))
		}
	}
	b.ReportMetric(float64(percentile(took, 0.5))/1e6, "ms-p50")
	b.ReportMetric(float64(percentile(took, 0.95))/1e6, "ms-p95")
}

// hundredSteps is a plan of 100 steps whose agent exits 0 at once.
func hundredSteps() []byte {
	var b strings.Builder
	b.WriteString("name: hundred\nsteps:\n")
	for i := range 100 {
		fmt.Fprintf(&b, "  - id: s%d\n    title: s%d\n    instruction: go\n", i, i)
	}
	return []byte(b.String())
}

// BenchmarkFleet_HundredSteps: a 100-step run of true on a worker (a commit
// and a push a step, the state mirrored to the bucket) beside the same plan
// run by the engine as stepseq watch runs it, in a plain folder.
func BenchmarkFleet_HundredSteps(b *testing.B) {
	setAgent(b, "true")
	s := startServer(b)
	bare := bareRepo(b)
	c := dial(b, s.ClientURL(), 1)
	inProcessWorker(b, s.ClientURL(), "w1", DefaultLease, 1)
	plan := hundredSteps()
	var fleetTook, watchTook time.Duration
	for b.Loop() {
		run := fmt.Sprintf("hundred-%d", time.Now().UnixNano())
		begin := time.Now()
		submit(b, c, Submission{Repo: bare, Run: run, Plan: plan})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		rec, err := WaitEnded(ctx, c, run)
		cancel()
		if err != nil || rec.Status != StatusDone {
			b.Fatalf("run %s: %v %s", rec.Status, err, rec.Reason)
		}
		fleetTook = time.Since(begin)
		if n := len(branchLog(b, bare, RunBranch(run))); n < 100 {
			b.Fatalf("%d commits on the branch, want one a step", n)
		}

		dir := b.TempDir()
		begin = time.Now()
		e, err := openEngine(dir, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := e.applyPlan(Job{Run: "hundred", Plan: plan, File: "hundred.yaml"}); err != nil {
			b.Fatal(err)
		}
		if err := e.run(context.Background(), "hundred", func() {}, nil, nil); err != nil {
			b.Fatal(err)
		}
		e.close()
		watchTook = time.Since(begin)
	}
	b.ReportMetric(float64(fleetTook)/1e6/100, "ms/step-fleet")
	b.ReportMetric(float64(watchTook)/1e6/100, "ms/step-watch")
}

// BenchmarkFleet_Failover: from a worker's death (kill -9 of the worker and
// its agent, mid-step) to the step's agent started again on an idle worker,
// against the lease: the run waits out the lease, then is cloned and resumed.
func BenchmarkFleet_Failover(b *testing.B) {
	setAgent(b, fakeAgentPath)
	bare := bareRepo(b)
	for _, lease := range []time.Duration{2 * time.Second, 5 * time.Second} {
		b.Run(lease.String(), func(b *testing.B) {
			// A server each: the lease is the consumer's, one for the fleet.
			s := startServer(b)
			c := dial(b, s.ClientURL(), 1)
			var took time.Duration
			for b.Loop() {
				took = failoverOnce(b, c, s.ClientURL(), bare, lease)
			}
			b.ReportMetric(took.Seconds(), "s-failover")
			b.ReportMetric(took.Seconds()/lease.Seconds(), "leases")
		})
	}
}

func failoverOnce(b *testing.B, c *Conn, url, bare string, lease time.Duration) time.Duration {
	dir := b.TempDir()
	run := fmt.Sprintf("failover-%d", time.Now().UnixNano())
	a := workerProcess(b, url, "A", lease)
	stamps := filepath.Join(dir, "stamps")
	submit(b, c, Submission{Repo: bare, Run: run, Plan: planOf("failover",
		"stamp:"+stamps+" pidfile:"+filepath.Join(dir, "pid")+" waitfor:"+filepath.Join(dir, "release"))})
	deadline := time.Now().Add(time.Minute)
	for lines(stamps) < 1 || !exists(filepath.Join(dir, "pid")) {
		if time.Now().After(deadline) {
			b.Fatal("no agent on A")
		}
		time.Sleep(5 * time.Millisecond)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "pid"))
	agent, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	// A's lease is renewed on its own clock: the death comes just after a
	// renewal, the worst case.
	_ = syscall.Kill(a.Process.Pid, syscall.SIGKILL)
	_ = syscall.Kill(agent, syscall.SIGKILL)
	killed := time.Now()
	_ = a.Wait()
	stop := inProcessWorker(b, url, "B", lease, 1)
	defer stop()
	for lines(stamps) < 2 {
		if time.Since(killed) > time.Minute {
			b.Fatal("the run was not resumed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := stampTimes(b, stamps)[1].Sub(killed)
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := WaitEnded(ctx, c, run); err != nil {
		b.Fatal(err)
	}
	return took
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// BenchmarkFleet_RecordWrite: one compare-and-set write of a run's record
// carrying a 100-step state, what a worker pays for each state it mirrors
// and each renewal of its lease.
func BenchmarkFleet_RecordWrite(b *testing.B) {
	s := startServer(b)
	c := dial(b, s.ClientURL(), 1)
	bare := bareRepo(b)
	submit(b, c, Submission{Repo: bare, Run: "write", Plan: hundredSteps()})
	l, skip, _, err := takeLease(context.Background(), c.KV, Job{ID: record(b, c, "write").ID, Run: "write"}, "w1", DefaultLease)
	if err != nil || skip {
		b.Fatalf("lease: %v, skip %v", err, skip)
	}
	dir := b.TempDir()
	e, err := openEngine(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer e.close()
	if err := e.applyPlan(Job{Run: "write", Plan: hundredSteps(), File: "hundred.yaml"}); err != nil {
		b.Fatal(err)
	}
	state, err := e.readState()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(state)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := l.update(context.Background(), func(r *Record) { r.State, r.Done = state, i }); err != nil {
			b.Fatal(err)
		}
	}
}
