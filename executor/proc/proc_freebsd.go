package proc

import (
	"encoding/binary"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// The fields of FreeBSD's struct kinfo_proc (<sys/user.h>) that stepseq reads, at
// their offsets on 64-bit systems. x/sys/unix has no type for it; a record whose
// size or pid does not match this layout is not read (see kinfo).
const (
	kinfoSize     = 1088 // sizeof(struct kinfo_proc), also its ki_structsize
	kinfoPID      = 72   // ki_pid, int32
	kinfoStart    = 336  // ki_start, struct timeval: int64 seconds, int64 microseconds
	kinfoStat     = 388  // ki_stat, char
	kinfoZombie   = 5    // SZOMB
	kinfoSizeWord = 0    // ki_structsize, int32
)

// kinfo reads one kinfo_proc record of b: the process's pid, start time in
// microseconds since the epoch and whether it is a zombie. ok is false when b does
// not hold a record of the known layout.
func kinfo(b []byte) (pid int, start uint64, zombie, ok bool) {
	if len(b) < kinfoSize || binary.NativeEndian.Uint32(b[kinfoSizeWord:]) != kinfoSize {
		return 0, 0, false, false
	}
	pid = int(int32(binary.NativeEndian.Uint32(b[kinfoPID:])))
	sec := binary.NativeEndian.Uint64(b[kinfoStart:])
	usec := binary.NativeEndian.Uint64(b[kinfoStart+8:])
	return pid, sec*1e6 + usec, b[kinfoStat] == kinfoZombie, true
}

// StartTicks reads when a process started, in microseconds since the epoch
// (sysctl kern.proc.pid: ki_start), so a recorded agent is never confused with a
// later process that reuses its pid. Where the record's layout is not the one
// known, the start is 0 and only the pid's existence is compared.
func StartTicks(pid int) (uint64, error) {
	b, err := unix.SysctlRaw("kern.proc.pid", pid)
	if err != nil {
		return 0, fmt.Errorf("process %d: %w", pid, err)
	}
	if len(b) == 0 {
		return 0, fmt.Errorf("process %d: %w", pid, syscall.ESRCH)
	}
	got, start, zombie, ok := kinfo(b)
	switch {
	case !ok:
		return 0, nil
	case got != pid:
		return 0, fmt.Errorf("process %d: %w", pid, syscall.ESRCH)
	case zombie:
		return 0, fmt.Errorf("process %d has exited", pid)
	}
	return start, nil
}

// groupHasLiving reports whether a process of group pgid, which has members, is
// not a zombie (sysctl kern.proc.pgrp lists the group).
func groupHasLiving(pgid int) bool {
	b, err := unix.SysctlRaw("kern.proc.pgrp", pgid)
	if err != nil {
		return true
	}
	for ; len(b) > 0; b = b[min(len(b), kinfoSize):] {
		_, _, zombie, ok := kinfo(b)
		if !ok || !zombie {
			return true
		}
	}
	return false
}
