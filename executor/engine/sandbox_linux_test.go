package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/planspec"
)

// The sandbox through the engine, with bubblewrap and real agents: what a
// sandboxed agent cannot do, and that its outputs, results and reports still
// reach stepseq.

var sandboxBin struct {
	sync.Once
	path string
}

// sandboxStepseq is the stepseq command, built once into the fake agent's
// folder, which the sandboxes of these tests show.
func sandboxStepseq(t *testing.T) string {
	t.Helper()
	sandboxBin.Do(func() {
		sandboxBin.path = filepath.Join(filepath.Dir(fakeAgentPath), "stepseq")
		if out, err := exec.Command("go", "build", "-o", sandboxBin.path, "github.com/stepseq/stepseq").CombinedOutput(); err != nil {
			t.Fatalf("build stepseq: %v\n%s", err, out)
		}
	})
	return sandboxBin.path
}

// hostPort listens on the host's loopback and accepts until the test ends.
func hostPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// sandboxChain is the workspace's chain under pol.
func (w *testWS) sandboxChain(pol core.SandboxPolicy) *Chain {
	c := w.chain()
	c.Runtime.Sandbox = pol
	return c
}

// logOf is the output of step id's first try, from its log.
func (w *testWS) logOf(id string) string {
	w.t.Helper()
	b, err := os.ReadFile(w.path(".stepseq/logs/" + id + "/1.log"))
	if err != nil {
		w.t.Fatal(err)
	}
	return string(b)
}

// TestSandbox_Confines: a sandboxed agent cannot write outside its workspace,
// nor state.json, .stepseq/ or plans/; with network: false it cannot reach a
// port on the host; it sees no variable it was not given. Its required output
// and its result file still work; a step with the network reaches the port, and
// its `stepseq report` learns from the lock that check reads it at the exit.
func TestSandbox_Confines(t *testing.T) {
	t.Setenv("SANDBOX_TEST_SECRET", "hidden")
	t.Setenv("SANDBOX_TEST_GIVEN", "given")
	addr := hostPort(t)
	outside, err := os.MkdirTemp("/var/tmp", "stepseq-sandbox-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	hostTmp := t.TempDir()
	show := fmt.Sprintf(`"read":[%q]`, filepath.Dir(fakeAgentPath))
	w := newTestWS(t, plan("",
		fmt.Sprintf(`"instruction":"try:%s try:%s try:state.json try:.stepseq/x try:plans/p.yaml dial:%s env:SANDBOX_TEST_SECRET env:SANDBOX_TEST_GIVEN write:out/a.md put:out/r.yaml=ok:%%20true",`+
			`"requiredOutputs":["out/a.md"],"resultFrom":"file:out/r.yaml","sandbox":{"network":false,%s,"env":["SANDBOX_TEST_GIVEN"]}`,
			filepath.Join(outside, "escaped"), filepath.Join(hostTmp, "escaped"), addr, show),
		fmt.Sprintf(`"instruction":"dial:%s report:%s write:out/b.md","requiredOutputs":["out/b.md"],"sandbox":{%s}`, addr, sandboxStepseq(t), show),
	))
	if err := os.MkdirAll(w.path("plans"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.sandboxChain(core.SandboxPolicy{}).Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := w.read()
	if st.Status != planspec.StatusDone {
		t.Fatalf("status %s, s1 %+v (%s), s2 %+v (%s)", st.Status, st.Run("s1"), errText(st.Run("s1")), st.Run("s2"), errText(st.Run("s2")))
	}
	out := w.logOf("s1")
	for _, want := range []string{
		"try " + filepath.Join(outside, "escaped") + " denied",
		"try " + filepath.Join(hostTmp, "escaped") + " denied",
		"try state.json denied",
		"try .stepseq/x denied",
		"try plans/p.yaml denied",
		"dial " + addr + " denied",
		"env SANDBOX_TEST_SECRET set=false",
		"env SANDBOX_TEST_GIVEN set=true given",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("s1's output lacks %q:\n%s", want, out)
		}
	}
	for _, p := range []string{filepath.Join(outside, "escaped"), filepath.Join(hostTmp, "escaped"), w.path(".stepseq/x"), w.path("plans/p.yaml")} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was written (%v)", p, err)
		}
	}
	if got := string(st.Run("s1").Result); got != `{"ok":true}` {
		t.Errorf("s1's result %s, want {\"ok\":true} from its result file", got)
	}
	out = w.logOf("s2")
	if !strings.Contains(out, "dial "+addr+" ok") {
		t.Errorf("s2, with the network, did not reach the host's port:\n%s", out)
	}
	// The workspace lock is read where the agent cannot write: its holder says
	// when the report is read.
	if !strings.Contains(out, "stepseq check reads it when this agent exits") {
		t.Errorf("s2's report was not told who reads it:\n%s", out)
	}
}

// TestSandbox_ReportFromInside: `stepseq report` run by a sandboxed agent
// reaches the sidecar that runs it, through the read-only workspace.
func TestSandbox_ReportFromInside(t *testing.T) {
	bin := sandboxStepseq(t)
	w := newTestWS(t, plan(`"stepseq":{"reports":"optional","sandbox":{"read":[`+fmt.Sprintf("%q", filepath.Dir(fakeAgentPath))+`]}}`,
		`"instruction":"report:`+bin+` write:out/a.md","requiredOutputs":["out/a.md"]`))
	c := w.sandboxChain(core.SandboxPolicy{})
	sc, err := NewSidecar(c.Runtime, SidecarOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	st := w.waitState("s1 done", func(st *planspec.State) bool { return st.Run("s1").Status == planspec.StatusDone })
	if out := w.logOf("s1"); !strings.Contains(out, "report done ok") {
		t.Errorf("stepseq report failed in the sandbox:\n%s", out)
	}
	if rs := st.Run("s1").Reports; len(rs) == 0 || rs[len(rs)-1].Status != "done" {
		t.Errorf("reports %+v, want the done report", rs)
	}
}

// TestSandbox_RequireRefusesBare: under --require-sandbox an unsandboxed step
// is a configuration error: its agent never runs and no try is spent.
func TestSandbox_RequireRefusesBare(t *testing.T) {
	w := newTestWS(t, plan("", `"instruction":"write:ran"`))
	err := w.sandboxChain(core.SandboxPolicy{Require: true}).Check(context.Background())
	if err == nil || !strings.Contains(err.Error(), "step s1 is not sandboxed") || !errors.Is(err, core.ErrConfig) {
		t.Fatalf("check: %v, want the refusal as a configuration error", err)
	}
	if _, err := os.Stat(w.path("ran")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the agent ran (%v)", err)
	}
	if r := w.read().Run("s1"); r.Tries != 0 {
		t.Errorf("a try was spent: %+v", r)
	}
}

// TestSandbox_NoBwrapFailsTheTry: without bwrap on PATH a sandboxed step's try
// fails with the reason and the fix, and its agent never runs bare.
func TestSandbox_NoBwrapFailsTheTry(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	w := newTestWS(t, plan(`"stepseq":{"maxRetries":1}`, `"instruction":"write:ran"`))
	_ = w.sandboxChain(core.SandboxPolicy{All: true}).Check(context.Background())
	r := w.read().Run("s1")
	if r.Status != planspec.StatusFailed || !strings.Contains(errText(r), "sandbox: bwrap not found: apt-get install bubblewrap") {
		t.Errorf("s1 %+v error %q, want it failed with the fix", r, errText(r))
	}
	if _, err := os.Stat(w.path("ran")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the agent ran bare (%v)", err)
	}
}

// heldNotes records the notifications of held files.
type heldNotes struct {
	mu    sync.Mutex
	notes []core.Notification
}

func (h *heldNotes) Notify(n core.Notification) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n.Event == core.EventHeld {
		h.notes = append(h.notes, n)
	}
}

func (h *heldNotes) outputs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, n := range h.notes {
		out = append(out, n.Output)
	}
	return out
}

// TestSandbox_HoldsFilesThatAppear: a plan file and a run file that appear
// while a sandboxed step runs are held (journaled, notified), not taken up;
// touched once the step is over, the run file is taken up.
func TestSandbox_HoldsFilesThatAppear(t *testing.T) {
	show := fmt.Sprintf(`"read":[%q]`, filepath.Dir(fakeAgentPath))
	w := newTestWS(t, plan(`"stepseq":{"sandbox":{`+show+`}}`,
		`"instruction":"pidfile:out/agent.pid waitfor:out/release write:out/a.md","requiredOutputs":["out/a.md"]`))
	if err := os.MkdirAll(w.path("plans"), 0o755); err != nil {
		t.Fatal(err)
	}
	notes := &heldNotes{}
	c := w.sandboxChain(core.SandboxPolicy{})
	sc, err := NewSidecar(c.Runtime, SidecarOptions{PlansDir: w.path("plans"), Notifier: notes})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	w.waitPID("out/agent.pid")

	other := w.path("state.other.json")
	if err := os.WriteFile(other, []byte(plan("", `"instruction":"write:other.md","requiredOutputs":["other.md"]`)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.path("plans/new.yaml"), []byte("steps:\n  - {id: n, title: N, instruction: \"write:new.md\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(notes.outputs()) >= 2 })
	// Written again while held, it is not told again: the next file held is
	// the next notice.
	again := time.Now().Add(2 * time.Second)
	if err := os.Chtimes(other, again, again); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.path("plans/newer.yaml"), []byte("steps:\n  - {id: m, title: M, instruction: \"write:newer.md\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return strings.Contains(strings.Join(notes.outputs(), "\n"), "plans/newer.yaml appeared") })
	told := strings.Join(notes.outputs(), "\n")
	if n := strings.Count(told, "state.other.json appeared"); n != 1 {
		t.Errorf("state.other.json told held %d times, want once:\n%s", n, told)
	}
	for _, want := range []string{"state.other.json appeared while the sandboxed step s1 ran: held", "plans/new.yaml appeared while the sandboxed step s1 ran: held"} {
		if !strings.Contains(told, want) {
			t.Errorf("notifications lack %q:\n%s", want, told)
		}
	}
	held := 0
	for _, e := range journalOf(t, w.path(".stepseq/journal.jsonl")) {
		if e.Event == "held" {
			held++
		}
	}
	if held != 3 {
		t.Errorf("%d held entries in the journal, want 3", held)
	}

	if err := os.WriteFile(w.path("out/release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w.waitState("s1 done", func(st *planspec.State) bool { return st.Run("s1").Status == planspec.StatusDone })
	if _, err := os.Stat(w.path("other.md")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the held run was taken up on its own (%v)", err)
	}
	later := time.Now().Add(time.Second)
	if err := os.Chtimes(other, later, later); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, err := os.Stat(w.path("other.md")); return err == nil })
}
