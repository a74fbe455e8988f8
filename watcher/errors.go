package watcher

import (
	"errors"
	"fmt"
	"strconv"
	"syscall"
)

var (
	// ErrWatchLimit means the kernel refused another watch: on Linux an inotify
	// watch (fs.inotify.max_user_watches) or instance
	// (fs.inotify.max_user_instances); with kqueue (macOS, the BSDs) a file
	// descriptor, since kqueue holds one open for each watched directory and each
	// file in it. The wrapping error says which limit and how to raise it.
	ErrWatchLimit = errors.New("watcher: watch limit reached")

	// ErrClosed is returned by Update once the Watcher is closed.
	ErrClosed = errors.New("watcher: closed")
)

// fileLimitError explains what (a watch, a start) kqueue refused for want of file
// descriptors: it holds one open for every watched directory and every file in
// one, so a folder of 10,000 files costs 10,000 of the process's open files. limit
// is the soft limit on open files (0: unknown).
func fileLimitError(what string, err error, limit uint64) error {
	now := "unknown"
	if limit > 0 {
		now = strconv.FormatUint(limit, 10)
	}
	return fmt.Errorf("%s: %w (%w): the open-file limit (ulimit -n, now %s) is used up:"+
		" kqueue holds a descriptor open for each watched directory and each file in one;"+
		" raise it (`ulimit -n 65536` in the shell that starts stepseq; macOS: `sudo launchctl limit maxfiles 65536 200000`;"+
		" FreeBSD: `sysctl kern.maxfiles kern.maxfilesperproc`), or watch fewer and smaller folders",
		what, ErrWatchLimit, err, now)
}

// openFileLimit is the process's soft limit on open files, 0 when unknown.
func openFileLimit() uint64 {
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) != nil {
		return 0
	}
	return uint64(rl.Cur)
}
