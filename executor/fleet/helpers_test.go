package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stepseq/stepseq/executor/internal/testwait"
)

// fakeAgentPath is testdata/fakeagent, built once by TestMain.
var fakeAgentPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "stepseq-fleet-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakeAgentPath = filepath.Join(dir, "fakeagent")
	build := exec.Command("go", "build", "-o", fakeAgentPath, "./testdata/fakeagent")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build the fake agent:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var (
	binDir       string
	stepseqOnce  sync.Once
	stepseqPath  string
	stepseqBuild error
)

// stepseqBinary is the product's binary, built once, for the tests that run a
// worker as a process of its own.
func stepseqBinary(t testing.TB) string {
	t.Helper()
	stepseqOnce.Do(func() {
		stepseqPath = filepath.Join(binDir, "stepseq")
		out, err := exec.Command("go", "build", "-o", stepseqPath, "github.com/stepseq/stepseq").CombinedOutput()
		if err != nil {
			stepseqBuild = fmt.Errorf("build stepseq: %v\n%s", err, out)
		}
	})
	if stepseqBuild != nil {
		t.Fatal(stepseqBuild)
	}
	return stepseqPath
}

// natsServer starts a JetStream server on a random loopback port, its store
// in a temporary folder; cluster, when not nil, makes it one of a cluster.
func natsServer(t testing.TB, name string, cluster *server.ClusterOpts, routes []*url.URL, store string) *server.Server {
	t.Helper()
	opts := &server.Options{
		ServerName: name, Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: store, JetStreamMaxMemory: 64 << 20, JetStreamMaxStore: 1 << 30,
	}
	if cluster != nil {
		opts.Cluster, opts.Routes = *cluster, routes
	}
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatalf("nats server %s not ready", name)
	}
	t.Cleanup(s.Shutdown)
	return s
}

func startServer(t testing.TB) *server.Server {
	return natsServer(t, "n1", nil, nil, t.TempDir())
}

// startCluster starts a JetStream cluster of n servers in this process.
func startCluster(t testing.TB, n int) []*server.Server {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		ports[i] = freePort(t)
	}
	var routes []*url.URL
	for _, p := range ports {
		routes = append(routes, &url.URL{Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", p)})
	}
	var servers []*server.Server
	for i := range n {
		c := &server.ClusterOpts{Name: "fleet", Host: "127.0.0.1", Port: ports[i]}
		servers = append(servers, natsServer(t, fmt.Sprintf("n%d", i+1), c, routes, t.TempDir()))
	}
	// Each server current in the meta group: a server that has not joined it
	// yet would leave the others without a quorum once one dies.
	waitFor(t, 30*time.Second, "the cluster's meta leader, every server current", func() bool {
		leader := false
		for _, s := range servers {
			if !s.JetStreamIsCurrent() {
				return false
			}
			leader = leader || s.JetStreamIsLeader()
		}
		return leader
	})
	return servers
}

func clusterURL(servers []*server.Server) string {
	var urls []string
	for _, s := range servers {
		if s.Running() {
			urls = append(urls, s.ClientURL())
		}
	}
	return strings.Join(urls, ",")
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, within, what, cond)
}

func runGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// bareRepo is a bare repository with one commit on main, the runs' remote.
func bareRepo(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	bare := filepath.Join(root, "remote.git")
	runGit(t, root, "init", "--quiet", "--bare", "--initial-branch=main", bare)
	seed := filepath.Join(root, "seed")
	runGit(t, root, "init", "--quiet", "--initial-branch=main", seed)
	if err := os.WriteFile(filepath.Join(seed, "README"), []byte("the project\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, seed, "add", ".")
	runGit(t, seed, "commit", "--quiet", "-m", "start")
	runGit(t, seed, "push", "--quiet", bare, "main")
	return bare
}

// branchLog is the subjects of the commits on the remote's branch, newest first.
func branchLog(t testing.TB, bare, branch string) []string {
	t.Helper()
	out := runGit(t, bare, "log", "--format=%s", branch)
	return strings.Split(out, "\n")
}

// agentEnv makes the fake agent the agent of every step, its twin locks in a
// folder of the test's; it returns that folder.
func agentEnv(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("STEP_AGENT_CMD", fakeAgentPath)
	t.Setenv("FAKEAGENT_DIR", dir)
	return dir
}

// planOf is a plan of steps whose instructions are the fake agent's words.
func planOf(name string, steps ...string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nsteps:\n", name)
	for i, words := range steps {
		id := fmt.Sprintf("s%d", i+1)
		fmt.Fprintf(&b, "  - id: %s\n    title: step %s\n    instruction: %q\n", id, id, words)
		for _, w := range strings.Fields(words) {
			if out, ok := strings.CutPrefix(w, "write:"); ok {
				fmt.Fprintf(&b, "    requiredOutputs: [%s]\n", out)
				break
			}
		}
	}
	return []byte(b.String())
}

func dial(t testing.TB, url string, replicas int) *Conn {
	t.Helper()
	c, err := Dial(context.Background(), url, Options{Name: t.Name(), Replicas: replicas})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// inProcessWorker runs a worker in this process until the test ends or stop
// is called; stop waits for it.
func inProcessWorker(t testing.TB, url, name string, lease time.Duration, maxRuns int) (stop func()) {
	t.Helper()
	c, err := Dial(context.Background(), url, Options{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return workerOn(t, c, name, lease, maxRuns)
}

// workerOn runs a worker on the connection c, which it closes once stopped.
func workerOn(t testing.TB, c *Conn, name string, lease time.Duration, maxRuns int) (stop func()) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	w, err := NewWorker(context.Background(), c, WorkerOptions{Workdir: t.TempDir(), MaxRuns: maxRuns, Lease: lease, Name: name, Logger: log})
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("worker %s: %v", name, err)
			}
			c.Close()
		})
	}
	t.Cleanup(stop)
	return stop
}

// testWriter sends a worker's log to the test's, while the test runs.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// record reads run's record.
func record(t testing.TB, c *Conn, run string) Record {
	t.Helper()
	rec, err := Get(context.Background(), c, run)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func submit(t testing.TB, c *Conn, s Submission) Record {
	t.Helper()
	if s.File == "" {
		s.File = "plan.yaml"
	}
	rec, err := Submit(context.Background(), c, s)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// rawJetStream is a JetStream of the test's own, to make what the fleet finds.
func rawJetStream(t testing.TB, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// workerProcess runs stepseq worker as a process of its own; its log is the
// test's once it has ended.
func workerProcess(t testing.TB, url, name string, lease time.Duration) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(stepseqBinary(t), "worker", "--nats", url, "--workdir", t.TempDir(), "--lease", lease.String(), "--name", name)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		t.Logf("worker %s:\n%s", name, log.String())
	})
	return cmd
}

// readPID reads the pid a fake agent wrote, once it has.
func readPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	waitFor(t, time.Minute, "the agent's pid in "+path, func() bool {
		data, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(data)))
		return err == nil && pid > 0
	})
	return pid
}

// gone reports whether the process pid has ended (or is a zombie no one reaps).
func gone(pid int) bool {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		return syscall.Kill(pid, 0) == syscall.ESRCH // no /proc: a zombie counts as alive
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command's closing parenthesis.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// lines counts the lines of path; 0 when it does not exist.
func lines(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(data), "\n")
}
