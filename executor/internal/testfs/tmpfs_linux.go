//go:build linux

package testfs

import (
	"syscall"
	"testing"
)

// MountTmpfs mounts a tmpfs with options data at dir, unmounted when the test ends.
func MountTmpfs(t *testing.T, dir, data string) error {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, data); err != nil {
		return err
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return nil
}
