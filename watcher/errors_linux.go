package watcher

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// watchError explains a failed inotify_add_watch on dir.
func watchError(dir string, err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("watch %s: %w (%w): fs.inotify.max_user_watches (now %s) is used up;"+
			" raise it with `sysctl fs.inotify.max_user_watches=524288`"+
			" (persist it in /etc/sysctl.d/), or watch fewer trees",
			dir, ErrWatchLimit, err, sysctl("max_user_watches"))
	}
	return fmt.Errorf("watch %s: %w", dir, err)
}

// initError explains a failed inotify_init.
func initError(err error) error {
	if errors.Is(err, syscall.EMFILE) {
		return fmt.Errorf("start inotify: %w (%w): fs.inotify.max_user_instances (now %s) or the open-file limit is used up;"+
			" raise it with `sysctl fs.inotify.max_user_instances=1024`",
			ErrWatchLimit, err, sysctl("max_user_instances"))
	}
	return fmt.Errorf("start inotify: %w", err)
}

func sysctl(name string) string {
	b, err := os.ReadFile("/proc/sys/fs/inotify/" + name)
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// notifierError is an error the kernel's queue reported while running.
func notifierError(err error) error { return fmt.Errorf("inotify: %w", err) }
