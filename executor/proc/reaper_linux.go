//go:build linux

package proc

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A step's descendants end with it, in their own session or not. Where
// stepseq launches its agents itself (no keeper: see keeper_linux.go, whose
// adopted processes endKept stops), stepseq is the child subreaper of what its
// agents start (PR_SET_CHILD_SUBREAPER), so a process that leaves the agent's
// group (setsid, a double fork) and loses its parent is reparented to stepseq
// rather than to init. When a step's group is swept, what was reparented to
// stepseq and carries the try's marks in its environment (see tryMarksOf) is
// stopped as the group is, and reaped. A descendant that cleared its
// environment is not found; one that outlived a stepseq that died is found by
// the next one when it judges the try (tryProcs).

var subreaper sync.Once

// becomeSubreaper makes this process the subreaper of its descendants, once,
// before its first agent starts.
func becomeSubreaper() {
	subreaper.Do(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) })
}

// endReparented stops the processes reparented to stepseq that carry marks:
// SIGTERM (to the group each leads), SIGKILL after grace, then reaps them and
// the zombies the swept group left. Their own children are reparented in turn
// and found by the next round.
func endReparented(group int, marks []string, grace time.Duration) {
	if !haveChildren() {
		return // nothing was reparented here and no zombie waits: the common case
	}
	self := os.Getpid()
	for round := 0; round < 8; round++ {
		live := reparented(self, marks)
		reapStrays(self, group)
		if len(live) == 0 {
			return
		}
		signalAll(live, syscall.SIGTERM)
		deadline := time.Now().Add(grace)
		for wait := time.Millisecond; time.Now().Before(deadline) && anyAlive(live); wait = min(2*wait, 50*time.Millisecond) {
			time.Sleep(wait) // they are children, but one may ignore SIGTERM: no blocking wait
		}
		signalAll(live, syscall.SIGKILL)
		reap(live)
		reapStrays(self, group)
	}
}

// haveChildren reports whether this process has any child at all, live or a
// zombie, with one waitid that reaps nothing (WNOWAIT): ECHILD says none. It
// spares a step's sweep its reads of /proc when no process was reparented to
// stepseq and the agent has been collected.
func haveChildren() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return !errors.Is(err, unix.ECHILD)
}

// reap collects the processes killed, a second at most (a machine under load):
// a leader's zombie can be collected only once its other threads are gone too.
func reap(pids []int) {
	end := time.Now().Add(time.Second)
	for _, pid := range pids {
		for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
			var ws syscall.WaitStatus
			n, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
			if n == pid || err != nil || time.Now().After(end) {
				break
			}
			time.Sleep(wait)
		}
	}
}

// reparented lists the live children of self that stepseq did not start itself
// and whose environment holds every mark.
func reparented(self int, marks []string) []int {
	if len(marks) == 0 {
		return nil
	}
	var out []int
	forChildren(self, func(c child) {
		if c.state == "Z" || c.state == "X" || ownChild(c.pid) {
			return
		}
		if carries(c.pid, marks) {
			out = append(out, c.pid)
		}
	})
	return out
}

// carries reports whether process pid's environment holds every mark. /proc
// shows the environment of this user's processes only; another's carries none.
func carries(pid int, marks []string) bool {
	if len(marks) == 0 {
		return false
	}
	env, err := readProc("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	vars := bytes.Split(env, []byte{0})
	for _, m := range marks {
		if !slices.ContainsFunc(vars, func(v []byte) bool { return string(v) == m }) {
			return false
		}
	}
	return true
}

// reapStrays collects the zombie children of self that no one else waits for:
// those in the swept group, or in a session of their own (stepseq starts none
// there), that are not an agent whose Wait is pending. A notification command
// ends in a group of its own in stepseq's session, and its Wait collects it.
func reapStrays(self, group int) {
	sid, _ := unix.Getsid(0)
	forChildren(self, func(c child) {
		if c.state != "Z" || c.pgid != group && c.sid == sid || ownChild(c.pid) {
			return
		}
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(c.pid, &ws, syscall.WNOHANG, nil)
	})
}

// child is what /proc says of a process.
type child struct {
	pid, ppid, pgid, sid int
	state                string
}

// forChildren calls f for every child of process ppid: the children files of
// its threads list them, a few small reads where a scan of /proc reads every
// process's stat; the scan is the fallback.
func forChildren(ppid int, f func(c child)) {
	task := "/proc/" + strconv.Itoa(ppid) + "/task/"
	tasks, _ := os.ReadDir(task)
	read := 0
	for _, t := range tasks {
		b, err := readProc(task + t.Name() + "/children")
		if err != nil {
			continue // a thread that ended, or a kernel without the file
		}
		read++
		for _, field := range bytes.Fields(b) {
			if pid, err := strconv.Atoi(string(field)); err == nil {
				if c, ok := readChild(pid); ok && c.ppid == ppid {
					f(c)
				}
			}
		}
	}
	if read > 0 {
		return
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if c, ok := readChild(pid); ok && c.ppid == ppid {
			f(c)
		}
	}
}

// readChild reads a process's parent, state, group and session from /proc.
func readChild(pid int) (child, bool) {
	b, err := readProc("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return child{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return child{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 4 { // state, ppid, pgrp, session
		return child{}, false
	}
	c := child{pid: pid, state: string(f[0])}
	var errs [3]error
	c.ppid, errs[0] = strconv.Atoi(string(f[1]))
	c.pgid, errs[1] = strconv.Atoi(string(f[2]))
	c.sid, errs[2] = strconv.Atoi(string(f[3]))
	return c, errs[0] == nil && errs[1] == nil && errs[2] == nil
}

func signalAll(pids []int, sig syscall.Signal) {
	for _, pid := range pids {
		if g, err := syscall.Getpgid(pid); err == nil && g == pid {
			_ = syscall.Kill(-pid, sig) // it leads a group of its own: the group goes too
		}
		_ = syscall.Kill(pid, sig)
	}
}

func anyAlive(pids []int) bool {
	for _, pid := range pids {
		if c, ok := readChild(pid); ok && c.state != "Z" && c.state != "X" {
			return true
		}
	}
	return false
}
