//go:build chaos

package engine

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/store"
)

// TestChaosOrphanGrandchild is TestChaos with a wrapper agent whose worker
// does the step's work without the try lock, in the wrapper's group and in a
// session of its own by turns of rounds: each kill of the sidecar is followed
// by a kill of the wrapper of the step that runs, when it has started,
// leaving the worker at its work. No second worker of a step may start beside
// the first, and a step whose worker finished is not run again.
func TestChaosOrphanGrandchild(t *testing.T) {
	kills, steps := chaosEnv("STEPSEQ_CHAOS_GRANDCHILD_KILLS", 100), chaosEnv("STEPSEQ_CHAOS_GRANDCHILD_STEPS", 60)
	bin := buildStepseq(t)
	var f chaosFigures
	var wrappers [2]int // wrappers killed, their worker in their group, in its own session
	began := time.Now()
	for round := 0; f.kills < kills && !t.Failed(); round++ {
		setsid := round%2 == 1
		// The work outlasts the wrapper's start, so that most kills find the
		// worker at it.
		agent := chaosAgent{sleep: 100, afterKill: killWrapper,
			cmd: func(out string) string {
				pids := filepath.Join(out, "wrappers")
				if err := os.MkdirAll(pids, 0o755); err != nil {
					t.Fatal(err)
				}
				return wrapperAgent(t, pids, setsid)
			}}
		before := f.agentKills
		chaosRound(t, bin, steps, min(kills-f.kills, max(kills/4, 1)), &f, agent)
		wrappers[round%2] += f.agentKills - before
	}
	t.Logf("chaos grandchild: %d kill -9 of the sidecar (%d double crashes, %d in the launch window), each followed by one of the running step's wrapper: %d wrappers killed with their worker in their group, %d with it in its own session, over %d rounds of %d steps in %s",
		f.kills, f.doubles, f.launchWindow, wrappers[0], wrappers[1], f.rounds, steps, time.Since(began).Round(time.Second))
	f.report(t)
}

// killWrapper kills the wrapper agent of the step state.json has running, if
// it still lives, once it has started (300 ms at most: a wrapper the killed
// sidecar launched goes on starting); it reports whether it killed one.
func killWrapper(dir, out string) bool {
	st, err := (&store.StateFile{Path: filepath.Join(dir, "state.json")}).Read()
	if err != nil || st.CurrentStep >= len(st.StepQueue) {
		return false
	}
	id := st.StepQueue[st.CurrentStep]
	var data []byte
	for end := time.Now().Add(300 * time.Millisecond); ; {
		if data, err = os.ReadFile(filepath.Join(out, "wrappers", id)); err == nil || time.Now().After(end) {
			break
		}
		time.Sleep(5 * time.Millisecond) // polls for the wrapper's start; synchronises nothing
	}
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(string(data))
	if err != nil {
		return false
	}
	// The pid is the wrapper's while its command line names the wrapper and
	// its environment the step.
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if !bytes.Contains(cmdline, []byte("wrapper.py")) || !environHolds(pid, "STEPSEQ_STEP="+id) {
		return false
	}
	return syscall.Kill(pid, syscall.SIGKILL) == nil
}

// environHolds reports whether process pid's environment holds the variable v
// (NAME=value).
func environHolds(pid int, v string) bool {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	return err == nil && bytes.Contains(append([]byte{0}, env...), []byte("\x00"+v+"\x00"))
}
