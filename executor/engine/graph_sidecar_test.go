package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/metrics"
	"github.com/stepseq/stepseq/planspec"
)

// graphPlan is a state whose steps run side by side: each entry is a step's
// id, its needs (JSON) and its spec's other members.
func graphPlan(extraTop string, steps ...[3]string) string {
	var specs, queue []string
	for _, s := range steps {
		specs = append(specs, fmt.Sprintf(`%q:{"title":%q,"needs":%s,%s}`, s[0], s[0], s[1], s[2]))
		queue = append(queue, fmt.Sprintf("%q", s[0]))
	}
	top := fmt.Sprintf(`{"plan":{"steps":{%s}},"stepQueue":[%s],"currentStep":0,"stepRuns":{},"stepDelayMinutes":0,"blockers":[],"status":"IN_PROGRESS"`,
		strings.Join(specs, ","), strings.Join(queue, ","))
	if extraTop != "" {
		top += "," + extraTop
	}
	return top + "}"
}

// lines counts the lines of the file at path; 0 when it is missing.
func lines(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(data), "\n")
}

// TestSidecar_GraphRunsSideBySide runs four branches and their join: the
// branches' agents run at once, never more than --max-agents of them (each
// holds one of two slot locks), never two of one step (each holds a lock
// named for its step), and the join starts once every branch is DONE.
func TestSidecar_GraphRunsSideBySide(t *testing.T) {
	out := t.TempDir()
	branch := func(id string) [3]string {
		return [3]string{id, "[]", fmt.Sprintf(`"instruction":"twin:%s slots:%s/2 count:%s waitfor:release write:out/%s count:%s","requiredOutputs":["out/%s"]`,
			filepath.Join(out, "twins"), filepath.Join(out, "slots"), filepath.Join(out, "starts"), id, filepath.Join(out, "ends"), id)}
	}
	w := newTestWS(t, graphPlan(`"stepseq":{"maxParallel":3}`, branch("a"), branch("b"), branch("c"), branch("d"),
		[3]string{"join", `["a","b","c","d"]`, fmt.Sprintf(`"instruction":"count:%s write:out/join","requiredOutputs":["out/join"]`, filepath.Join(out, "joins"))}))
	reg := metrics.NewRegistry()
	w.startSidecar(SidecarOptions{MaxAgents: 2, Metrics: NewMetrics(reg, nil)})
	waitFor(t, func() bool { return lines(filepath.Join(out, "starts")) == 2 })
	waitFor(t, func() bool { v, _ := reg.Value("stepseq_running_agents"); return v == 2 })
	st := w.waitState("two branches running", func(st *planspec.State) bool {
		return st.Run("a").Status == planspec.StatusInProgress && st.Run("b").Status == planspec.StatusInProgress
	})
	if got := st.Run("c").Status; got != planspec.StatusInProgress {
		t.Errorf("c is %s: maxParallel 3 records the third try while --max-agents 2 holds its launch back", got)
	}
	r, err := Describe(w.chain().Runtime, st, time.Now(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Graph || !slices.Equal(r.Running, []string{"a", "b"}) || !strings.HasPrefix(r.WaitingFor.Reason, "running side by side: a, b") {
		t.Errorf("status: graph %v, running %v, now %q", r.Graph, r.Running, r.WaitingFor.Reason)
	}
	if last := r.Steps[4]; last.ID != "join" || !slices.Equal(last.Needs, []string{"a", "b", "c", "d"}) {
		t.Errorf("join's needs: %+v", last)
	}
	w.writeFile("release", "")
	st = w.waitState("DONE", done)
	waitFor(t, func() bool { v, _ := reg.Value("stepseq_running_agents"); return v == 0 })
	if n := lines(filepath.Join(out, "starts")); n != 4 {
		t.Errorf("%d branch agents started, want 4", n)
	}
	if n := lines(filepath.Join(out, "joins")); n != 1 {
		t.Errorf("the join ran %d times, want 1", n)
	}
	for _, f := range []string{"slots/over", "twins/overlaps"} {
		if data, err := os.ReadFile(filepath.Join(out, f)); err == nil {
			t.Errorf("%s:\n%s", f, data)
		}
	}
	if st.CurrentStep != 5 {
		t.Errorf("cursor %d, want 5", st.CurrentStep)
	}
}

// TestSidecar_GraphKillMidFanOutTwice kills the sidecar while three branches'
// agents run, then the sidecar started after it as it starts: the third
// sidecar waits for the live agents instead of launching twins (each agent
// holds a lock named for its step and says when it finds it taken), and each
// branch is judged once by what its agent left.
func TestSidecar_GraphKillMidFanOutTwice(t *testing.T) {
	out := t.TempDir()
	branch := func(id string) [3]string {
		return [3]string{id, "[]", fmt.Sprintf(`"instruction":"twin:%s count:%s waitfor:release write:out/%s","requiredOutputs":["out/%s"]`,
			filepath.Join(out, "twins"), filepath.Join(out, "starts"), id, id)}
	}
	w := newTestWS(t, graphPlan("", branch("a"), branch("b"), branch("c"),
		[3]string{"join", `["a","b","c"]`, `"instruction":"write:out/join","requiredOutputs":["out/join"]`}))
	first := w.startSidecarProcess()
	waitFor(t, func() bool { return lines(filepath.Join(out, "starts")) == 3 })
	_ = first.Process.Signal(syscall.SIGKILL)
	_ = first.Wait()

	second := w.startSidecarProcess()
	w.waitJournalCount(`"event":"start"`, 2)
	_ = second.Process.Signal(syscall.SIGKILL)
	_ = second.Wait()

	before := journalSize(w)
	w.startSidecarProcess()
	waitFor(t, func() bool { return strings.Contains(journalFrom(w, before), `"event":"ready"`) })
	if n := lines(filepath.Join(out, "starts")); n != 3 {
		t.Fatalf("%d agents started while the first three lived, want 3", n)
	}
	w.writeFile("release", "")
	st := w.waitState("DONE", done)
	for _, id := range []string{"a", "b", "c", "join"} {
		if r := st.Run(id); r.Status != planspec.StatusDone || r.Tries != 1 {
			t.Errorf("%s: %s after %d tries, want DONE after 1", id, r.Status, r.Tries)
		}
	}
	if n := lines(filepath.Join(out, "starts")); n != 3 {
		t.Errorf("%d branch agents started, want 3: an orphan that finished was run again", n)
	}
	if data, err := os.ReadFile(filepath.Join(out, "twins", "overlaps")); err == nil {
		t.Errorf("twins:\n%s", data)
	}
}

// journalSize is the journal's length now; journalFrom what was added since.
func journalSize(w *testWS) int {
	data, _ := os.ReadFile(w.path(".stepseq/journal.jsonl"))
	return len(data)
}

func journalFrom(w *testWS, off int) string {
	data, _ := os.ReadFile(w.path(".stepseq/journal.jsonl"))
	if off > len(data) {
		return ""
	}
	return string(data[off:])
}

// waitJournalCount waits for n journal lines holding text.
func (w *testWS) waitJournalCount(text string, n int) {
	w.t.Helper()
	waitFor(w.t, func() bool {
		data, _ := os.ReadFile(w.path(".stepseq/journal.jsonl"))
		return strings.Count(string(data), text) >= n
	})
}

// TestSidecar_PullOffersEachReadyInstance offers each ready instance of a
// pulled foreach to whichever worker asks: each worker gets one of its own,
// the same one when it asks again; the join is offered once both are done.
func TestSidecar_PullOffersEachReadyInstance(t *testing.T) {
	_, sc := pullWS(t, `agent: mcp
steps:
  - id: fix
    needs: []
    foreach: '["x", "y"]'
    title: Fix ${item}
    instruction: Fix ${item}
  - id: join
    title: Join
    instruction: Join them
`)
	ctx := context.Background()
	a := take(t, sc, "worker-a")
	b := take(t, sc, "worker-b")
	if a.Step != "fix[0]" || b.Step != "fix[1]" || a.Prompt != "Fix x" || b.Prompt != "Fix y" {
		t.Fatalf("offers %+v and %+v", a, b)
	}
	if again := take(t, sc, "worker-a"); again.Step != a.Step || again.Token != a.Token {
		t.Errorf("worker-a asked again and got %+v", again)
	}
	if _, ok, why, _ := sc.Current(ctx, "worker-c", nil); ok || !strings.Contains(why, "taken by another worker") {
		t.Errorf("a third worker: ok=%v why=%q", ok, why)
	}
	for _, o := range []Offer{a, b} {
		for _, st := range []string{planspec.ReportAccepted, planspec.ReportDone} {
			if ok, reasons, err := verdictOf(sc.Sidecar, ctx, o.Step, o.Try, report(st, ""), "mcp"); err != nil || !ok {
				t.Fatalf("%s %s: %v %v", o.Step, st, reasons, err)
			}
		}
	}
	if j := take(t, sc, "worker-c"); j.Step != "join" {
		t.Errorf("after both instances, worker-c got %+v", j)
	}
}

// TestSidecar_GraphShutdownStopsEveryAgent stops the sidecar while two
// branches run: both agents are stopped and waited for, both steps stay
// IN_PROGRESS, and the next start runs them again without spending a try.
func TestSidecar_GraphShutdownStopsEveryAgent(t *testing.T) {
	w := newTestWS(t, graphPlan("",
		[3]string{"a", "[]", `"instruction":"pidfile:a.pid waitfor:go write:a.txt","requiredOutputs":["a.txt"]`},
		[3]string{"b", "[]", `"instruction":"pidfile:b.pid waitfor:go write:b.txt","requiredOutputs":["b.txt"]`}))
	run := w.startSidecar(SidecarOptions{})
	pa, pb := w.waitPID("a.pid"), w.waitPID("b.pid")
	run.stop(t)
	for _, pid := range []int{pa, pb} {
		if processExists(pid) {
			t.Errorf("agent %d survived the shutdown", pid)
		}
	}
	st := w.read()
	for _, id := range []string{"a", "b"} {
		if r := st.Run(id); r.Status != planspec.StatusInProgress {
			t.Errorf("%s is %s after the shutdown, want IN_PROGRESS", id, r.Status)
		}
	}
	w.writeFile("go", "")
	w.startSidecar(SidecarOptions{})
	st = w.waitState("DONE", done)
	for _, id := range []string{"a", "b"} {
		if r := st.Run(id); r.Tries != 1 || r.Agent.Interruptions != 1 {
			t.Errorf("%s: %d tries, %d interruptions; want 1 and 1", id, r.Tries, r.Agent.Interruptions)
		}
	}
}
