package exepages

import (
	"bytes"
	"fmt"
	"os"
	"reflect"

	"golang.org/x/sys/unix"
)

// Release unmaps the executable's code and read-only data (MADV_DONTNEED on
// its read-only private mappings whose pages are all clean pages of the file)
// and returns how many bytes of address space that covered. Under a debugger it does nothing: a breakpoint is a private
// copy of a code page, which MADV_DONTNEED would drop.
func Release() (int64, error) {
	if traced() {
		return 0, nil
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	spans, err := cleanSpans(f, reflect.ValueOf(Release).Pointer())
	if err != nil {
		return 0, err
	}
	var n int64
	for _, s := range spans {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, s.start, s.end-s.start, unix.MADV_DONTNEED); errno != 0 {
			return n, fmt.Errorf("madvise %#x-%#x: %w", s.start, s.end, errno)
		}
		n += int64(s.end - s.start)
	}
	return n, nil
}

// traced says whether a debugger is attached: TracerPid in /proc/self/status
// is not 0 (or cannot be read).
func traced() bool {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return true
	}
	for line := range bytes.Lines(data) {
		if v, ok := bytes.CutPrefix(line, []byte("TracerPid:")); ok {
			return string(bytes.TrimSpace(v)) != "0"
		}
	}
	return true
}
