package executor

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/fsnotify/fsnotify"
)

func ignoreTerm() { signal.Ignore(syscall.SIGTERM) }

// waitForFile blocks until path exists, woken by fsnotify rather than a poll.
func waitForFile(path string) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return
	}
	defer w.Close()
	_ = w.Add(dirOf(path))
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case <-w.Events:
		case <-w.Errors:
		}
	}
}

func dirOf(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			return path[:i]
		}
	}
	return "."
}
