//go:build !linux

package watcher

import (
	"errors"
	"fmt"
	"syscall"
)

// watchError explains a failed watch of dir. fsnotify's kqueue opens dir and each
// file in it: running out of descriptors is its limit.
func watchError(dir string, err error) error {
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		return fileLimitError("watch "+dir, err, openFileLimit())
	}
	return fmt.Errorf("watch %s: %w", dir, err)
}

// initError explains a failed start of the notifier.
func initError(err error) error {
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		return fileLimitError("start kqueue", err, openFileLimit())
	}
	return fmt.Errorf("start the file notifier: %w", err)
}

// notifierError is an error fsnotify reported while running: kqueue watches each
// file that appears in a watched directory, and may run out of descriptors then.
func notifierError(err error) error {
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		return fileLimitError("kqueue", err, openFileLimit())
	}
	return fmt.Errorf("kqueue: %w", err)
}
