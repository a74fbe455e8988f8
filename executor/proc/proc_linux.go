package proc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// StartTicks reads a process's start time (clock ticks since boot) from /proc, so a
// recorded agent is never confused with a later process that reuses its pid.
func StartTicks(pid int) (uint64, error) {
	b, err := readProc("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces and parentheses: fields count from the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); starttime is field 22.
	if len(f) < 20 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	if f[0] == "Z" || f[0] == "X" {
		return 0, fmt.Errorf("process %d has exited", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// groupHasLiving reports whether a process of group pgid, which has members, is
// not a zombie: /proc names each process's group and state.
func groupHasLiving(pgid int) bool {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, state, ok := procGroup(pid); ok && g == pgid && state != "Z" && state != "X" {
			return true
		}
	}
	return false
}

// procGroup reads a process's group id and state from /proc.
func procGroup(pid int) (pgid int, state string, ok bool) {
	b, err := readProc("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, "", false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, "", false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 3 { // state, ppid, pgrp
		return 0, "", false
	}
	pgid, err = strconv.Atoi(f[2])
	return pgid, f[0], err == nil
}

// readProc reads a file of /proc with open(2) and read(2) alone: os.ReadFile
// would offer each to Go's poller first (three fcntl and an epoll_ctl that
// refuses it), which costs more than the read on a path taken at each launch.
func readProc(path string) ([]byte, error) {
	var fd int
	err := ignoringEINTR(func() (err error) {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	b := make([]byte, 0, 1024)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := unix.Read(fd, b[len(b):cap(b)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return b, nil
		}
		b = b[:len(b)+n]
	}
}
