package engine

import (
	"testing"

	"github.com/stepseq/stepseq/executor/internal/testfs"
)

// tmpfsWorkspace is a test workspace on a tmpfs of size bytes of its own, so that
// the test can fill it. It skips, saying why, where no tmpfs can be mounted.
func tmpfsWorkspace(t *testing.T, size string) *testWS {
	t.Helper()
	w := newTestWS(t, "")
	if err := testfs.MountTmpfs(t, w.dir, "size="+size+",mode=0755"); err != nil {
		t.Skipf("a full disk needs a tmpfs of its own: mount refused (%v); run as root, or where mounts are allowed", err)
	}
	return w
}
