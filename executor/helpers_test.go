package executor

import (
	"context"
	"fmt"
)

var sprintf = fmt.Sprintf

func atoi(s string) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// processExists reports whether pid names a live (not zombie) process.
func processExists(pid int) bool {
	_, err := StartTicks(pid)
	return err == nil
}

func contextWithCancel() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}
