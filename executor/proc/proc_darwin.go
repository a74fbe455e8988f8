package proc

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// sZomb is p_stat of a process that has exited and waits to be collected
// (SZOMB in <sys/proc.h>).
const sZomb = 5

// StartTicks reads when a process started, in microseconds since the epoch
// (sysctl kern.proc.pid: p_starttime), so a recorded agent is never confused with a
// later process that reuses its pid.
func StartTicks(pid int) (uint64, error) {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil {
		return 0, fmt.Errorf("process %d: %w", pid, err)
	}
	if int(kp.Proc.P_pid) != pid {
		return 0, fmt.Errorf("process %d: %w", pid, syscall.ESRCH)
	}
	if kp.Proc.P_stat == sZomb {
		return 0, fmt.Errorf("process %d has exited", pid)
	}
	tv := kp.Proc.P_starttime
	return uint64(tv.Sec)*1e6 + uint64(tv.Usec), nil
}

// groupHasLiving reports whether a process of group pgid, which has members, is
// not a zombie (sysctl kern.proc.pgrp lists the group).
func groupHasLiving(pgid int) bool {
	procs, err := unix.SysctlKinfoProcSlice("kern.proc.pgrp", pgid)
	if err != nil {
		return true
	}
	for _, kp := range procs {
		if kp.Proc.P_stat != sZomb {
			return true
		}
	}
	return false
}
