package executor

import (
	"strconv"
	"strings"
)

// atoi reads a pid a test agent wrote; 0 when there is none yet.
func atoi(s string) int {
	n, _ := strconv.Atoi(strings.TrimSpace(s))
	return n
}

// processExists reports whether pid names a live (not zombie) process.
func processExists(pid int) bool {
	_, err := StartTicks(pid)
	return err == nil
}
