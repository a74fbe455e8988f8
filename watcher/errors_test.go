package watcher

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

// TestFileLimitError: kqueue's refusal for want of descriptors matches
// ErrWatchLimit and the errno, and says which limit it is, its value and how to
// raise it on macOS and FreeBSD.
func TestFileLimitError(t *testing.T) {
	err := fileLimitError("watch /ws/src", syscall.EMFILE, 256)
	if !errors.Is(err, ErrWatchLimit) || !errors.Is(err, syscall.EMFILE) {
		t.Errorf("%v: does not match ErrWatchLimit and EMFILE", err)
	}
	for _, want := range []string{"watch /ws/src", "ulimit -n, now 256", "each file", "launchctl limit maxfiles", "kern.maxfilesperproc"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %q", err, want)
		}
	}
	if err := fileLimitError("kqueue", syscall.ENFILE, 0); !strings.Contains(err.Error(), "now unknown") {
		t.Errorf("%q: an unknown limit is not said so", err)
	}
	if openFileLimit() == 0 {
		t.Error("openFileLimit: 0, want the soft RLIMIT_NOFILE")
	}
}
