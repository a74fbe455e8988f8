package proc

import (
	"github.com/stepseq/stepseq/executor/store"
	"os/exec"
	"strconv"
	"strings"
	"sync"
)

// stepseq's own children, the agents whose Wait is pending: a sweep of what was
// reparented to stepseq never signals nor reaps one of them. Registering them
// around the fork closes the window in which a new agent could be mistaken for a
// stray.
var children struct {
	sync.Mutex
	pids map[int]bool
}

// startChild starts cmd and registers its pid until forgetChild.
func startChild(cmd *exec.Cmd) error {
	children.Lock()
	defer children.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	if children.pids == nil {
		children.pids = map[int]bool{}
	}
	children.pids[cmd.Process.Pid] = true
	return nil
}

// registerChild registers pid as an agent whose end this process waits for
// though it did not start it (the keeper did), until forgetChild.
func registerChild(pid int) {
	children.Lock()
	defer children.Unlock()
	if children.pids == nil {
		children.pids = map[int]bool{}
	}
	children.pids[pid] = true
}

// forgetChild is called once cmd.Wait returned.
func forgetChild(pid int) {
	children.Lock()
	defer children.Unlock()
	delete(children.pids, pid)
}

func ownChild(pid int) bool {
	children.Lock()
	defer children.Unlock()
	return children.pids[pid]
}

// tryMarks are the variables of env that name a try (see tryMarksOf): its
// descendants carry them.
func tryMarks(env []string) []string {
	var marks []string
	for _, v := range env {
		for _, k := range markNames {
			if strings.HasPrefix(v, k+"=") {
				marks = append(marks, v)
			}
		}
	}
	if len(marks) < len(markNames) {
		return nil
	}
	return marks
}

// markNames are the variables of AgentEnv that, together, name one try of one
// run: the workspace, the run's state file, the step and the try.
var markNames = []string{"STEPSEQ_WORKSPACE", "STEPSEQ_STATE", "STEPSEQ_STEP", "STEPSEQ_TRY"}

// tryMarksOf are the marks AgentEnv gives the agents of step's try in ws.
func tryMarksOf(ws store.Workspace, step string, try int) []string {
	return []string{"STEPSEQ_WORKSPACE=" + ws.Dir, "STEPSEQ_STATE=" + ws.State, "STEPSEQ_STEP=" + step, "STEPSEQ_TRY=" + strconv.Itoa(try)}
}
