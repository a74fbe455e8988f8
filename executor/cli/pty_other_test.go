//go:build !linux

package cli

import (
	"os"
	"testing"
)

// openPTY skips: the tests open a pseudo-terminal the Linux way (/dev/ptmx,
// TIOCSPTLCK, /dev/pts/N) only.
func openPTY(t *testing.T) (master, pts *os.File) {
	t.Helper()
	t.Skip("the terminal tests open their pseudo-terminal the Linux way only")
	return nil, nil
}
