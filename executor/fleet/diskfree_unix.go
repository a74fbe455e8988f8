//go:build unix

package fleet

import "golang.org/x/sys/unix"

// diskFree is the space left to an unprivileged writer on dir's filesystem;
// ok is false when it cannot be told.
func diskFree(dir string) (free uint64, ok bool) {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return 0, false
	}
	return uint64(st.Bavail) * uint64(st.Bsize), true
}
