//go:build darwin || freebsd || netbsd

package store

import "syscall"

// statTimes are a file's modification and change times, as this system names them.
func statTimes(st *syscall.Stat_t) (mtime, ctime syscall.Timespec) {
	return st.Mtimespec, st.Ctimespec
}
