package watcher

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

func networkFS(dir string) (string, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return "", false
	}
	kind := ""
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		if real, err = filepath.Abs(real); err == nil {
			if f, err := os.Open("/proc/self/mountinfo"); err == nil {
				kind = mountType(f, real)
				f.Close()
			}
		}
	}
	return classify(uint32(st.Type), kind)
}
