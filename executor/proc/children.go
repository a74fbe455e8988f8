package proc

import (
	"os/exec"
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

// tryMarks are the variables of env that name a try: its descendants carry them.
func tryMarks(env []string) []string {
	var marks []string
	for _, v := range env {
		for _, k := range []string{"STEPSEQ_WORKSPACE=", "STEPSEQ_STEP=", "STEPSEQ_TRY="} {
			if strings.HasPrefix(v, k) {
				marks = append(marks, v)
			}
		}
	}
	if len(marks) < 3 {
		return nil
	}
	return marks
}
