package store

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/internal/testfs"
	"github.com/stepseq/stepseq/planspec"
)

// TestMain turns this test binary into the state writer that
// TestStateFile_KillNineMidWrite kills, when the environment asks for it.
func TestMain(m *testing.M) {
	if path := os.Getenv("STEPSEQ_TEST_WRITER"); path != "" {
		os.Exit(stateWriter(path))
	}
	os.Exit(m.Run())
}

// effectWait bounds every wait for an effect: long enough for a loaded machine,
// and a failing test still ends.
const effectWait = 5 * time.Minute

// testBinary is this test binary, which TestMain turns into helpers by environment.
func testBinary(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// chainState is an n-step plan whose steps need nothing but exit 0, and, with
// outputs, two required outputs each.
func chainState(n int, outputs bool) *planspec.State {
	st := planspec.NewState()
	for i := range n {
		id := fmt.Sprintf("step-%03d", i)
		st.Steps[id] = &planspec.StepSpec{Title: "Step " + id, Instruction: fmt.Sprintf("Do step %s and report what you did.", id)}
		if outputs {
			st.Steps[id].RequiredOutputs = []string{"out/" + id + "/a.md", "out/" + id + "/b.md"}
		}
		st.StepQueue = append(st.StepQueue, id)
	}
	return st
}

// tmpfsDir is a folder on a tmpfs of size bytes of its own, so that the test can
// fill it. It skips, saying why, where no tmpfs can be mounted.
func tmpfsDir(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := testfs.MountTmpfs(t, dir, "size="+size+",mode=0755"); err != nil {
		t.Skipf("a full disk needs a tmpfs of its own: mount refused (%v); run as root, or where mounts are allowed", err)
	}
	return dir
}
