package engine

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stepseq/stepseq/executor/metrics"
	"github.com/stepseq/stepseq/planspec"
)

// An agent an earlier stepseq left running, which a restarted sidecar waits
// for, runs for the workspace as the sidecar's own agents do: --max-agents
// bounds it with them, and the running-agents gauge shows it. Each agent below
// holds the one slot lock of a pool of one while it runs, and notes in
// slots/over when it finds the slot taken: a second agent beside the first.

// fileFrom is the file at path past its first off bytes; "" while shorter.
func fileFrom(path string, off int) string {
	data, _ := os.ReadFile(path)
	if off > len(data) {
		return ""
	}
	return string(data[off:])
}

// killSidecar kills a sidecar process with SIGKILL and reaps it; the agent
// whose pid is given must outlive it.
func killSidecar(t *testing.T, sidecar *exec.Cmd, agent int) {
	t.Helper()
	_ = sidecar.Process.Signal(syscall.SIGKILL)
	_ = sidecar.Wait()
	if !processExists(agent) {
		t.Fatal("the agent died with its sidecar; it runs in its own process group and should not")
	}
}

// waitLaunchOrQueue waits for the journal at path, past off, to tell that
// step's try waits for a slot, and fails t if the try started instead.
func waitLaunchOrQueue(t *testing.T, path string, off int, step string) {
	t.Helper()
	launched, queued := fmt.Sprintf(`"event":"launch","step":%q`, step), fmt.Sprintf(`"event":"launch-queued","step":%q`, step)
	var added string
	waitFor(t, func() bool {
		added = fileFrom(path, off)
		return strings.Contains(added, launched) || strings.Contains(added, queued)
	})
	if strings.Contains(added, launched) {
		t.Fatalf("step %s's agent (journal %s) started beside the agent left running, over --max-agents 1:\n%s", step, path, added)
	}
}

// TestSidecar_MaxAgentsCountsInheritedAgent: --max-agents 1; the sidecar is
// killed with SIGKILL while the workspace's agent runs, and the next one waits
// for that agent. A second run's try, whether it was waiting for a slot at the
// kill or is written after the restart, starts only once that agent has ended;
// the gauge reads 1 while it runs, and 0 once both are done.
func TestSidecar_MaxAgentsCountsInheritedAgent(t *testing.T) {
	for _, tc := range []struct {
		name    string
		atStart bool // run b is there when the sidecar restarts
	}{
		{"run waiting at the restart", true},
		{"run written after the restart", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := t.TempDir()
			slots, starts := filepath.Join(out, "slots"), filepath.Join(out, "starts")
			w := newTestWS(t, plan("", fmt.Sprintf(`"instruction":"slots:%s/1 pidfile:agent.pid waitfor:release write:out","requiredOutputs":["out"]`, slots)))
			second := plan("", fmt.Sprintf(`"instruction":"slots:%s/1 count:%s"`, slots, starts))
			bJournal := w.path(".stepseq/runs/b/journal.jsonl")
			first := w.startSidecarProcess("STEPSEQ_TEST_MAX_AGENTS=1")
			agent := w.waitPID("agent.pid")
			w.waitJournal(`"event":"launch","step":"s1"`)
			if tc.atStart {
				w.writeRun("b", second)
				waitLaunchOrQueue(t, bJournal, 0, "s1")
			}
			killSidecar(t, first, agent)

			off := len(fileFrom(bJournal, 0))
			reg := metrics.NewRegistry()
			w.startSidecar(SidecarOptions{MaxAgents: 1, Metrics: NewMetrics(reg, nil)})
			w.waitJournal(`"action":"running"`)
			if !tc.atStart {
				w.writeRun("b", second)
			}
			waitLaunchOrQueue(t, bJournal, off, "s1")
			if n := lines(starts); n != 0 {
				t.Fatalf("%d agents of run b started while the agent left running lived", n)
			}
			if v, _ := reg.Value("stepseq_running_agents"); v != 1 {
				t.Errorf("stepseq_running_agents = %v while the agent left running runs, want 1", v)
			}

			w.writeFile("release", "")
			w.waitState("DONE", done)
			w.waitRun("b", "DONE", done)
			if n := lines(starts); n != 1 {
				t.Errorf("run b's agent started %d times, want 1", n)
			}
			if data, err := os.ReadFile(filepath.Join(slots, "over")); err == nil {
				t.Errorf("two agents at once under --max-agents 1:\n%s", data)
			}
			waitFor(t, func() bool { v, _ := reg.Value("stepseq_running_agents"); return v == 0 })
		})
	}
}

// TestSidecar_MaxAgentsCountsInheritedLane: a plan whose two steps may run side
// by side, --max-agents 1: a's agent runs, b's try waits for a slot, and the
// sidecar is killed with SIGKILL. The next one waits for a's agent, counts it,
// and starts b's only once it has ended; the gauge follows a's end.
func TestSidecar_MaxAgentsCountsInheritedLane(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	slots, starts := filepath.Join(out, "slots"), filepath.Join(out, "starts")
	w := newTestWS(t, graphPlan(`"stepseq":{"maxParallel":2}`,
		[3]string{"a", "[]", fmt.Sprintf(`"instruction":"slots:%s/1 pidfile:agent.pid waitfor:release write:out/a","requiredOutputs":["out/a"]`, slots)},
		[3]string{"b", "[]", fmt.Sprintf(`"instruction":"slots:%s/1 count:%s write:out/b","requiredOutputs":["out/b"]`, slots, starts)}))
	journal := w.path(".stepseq/journal.jsonl")
	first := w.startSidecarProcess("STEPSEQ_TEST_MAX_AGENTS=1")
	agent := w.waitPID("agent.pid")
	w.waitJournal(`"event":"launch","step":"a"`)
	waitLaunchOrQueue(t, journal, 0, "b")
	killSidecar(t, first, agent)

	off := journalSize(w)
	reg := metrics.NewRegistry()
	w.startSidecar(SidecarOptions{MaxAgents: 1, Metrics: NewMetrics(reg, nil)})
	waitLaunchOrQueue(t, journal, off, "b")
	if n := lines(starts); n != 0 {
		t.Fatalf("%d agents of b started while a's agent, left running, lived", n)
	}
	if v, _ := reg.Value("stepseq_running_agents"); v != 1 {
		t.Errorf("stepseq_running_agents = %v while a's agent runs, want 1", v)
	}

	w.writeFile("release", "")
	st := w.waitState("DONE", done)
	for _, id := range []string{"a", "b"} {
		if r := st.Run(id); r.Status != planspec.StatusDone {
			t.Errorf("%s is %s, want DONE", id, r.Status)
		}
	}
	if n := lines(starts); n != 1 {
		t.Errorf("b's agent started %d times, want 1", n)
	}
	if data, err := os.ReadFile(filepath.Join(slots, "over")); err == nil {
		t.Errorf("two agents at once under --max-agents 1:\n%s", data)
	}
	waitFor(t, func() bool { v, _ := reg.Value("stepseq_running_agents"); return v == 0 })
}
