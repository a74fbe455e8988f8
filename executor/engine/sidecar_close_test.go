package engine

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// TestSidecar_CloseAsTheStepIsDispatched: a close request made the instant a
// run's first state write shows its step dispatched — before the sidecar has
// carried out the rest of that input (the agent's launch, the run's watch
// set) — is taken: the run is archived, its request answered, its agent (a
// process, or a pulled try's offer) stopped, and nothing writes the run's
// state after the archive. The request is written from OnChange, which the
// loop calls right after the write, so the test holds the sidecar in that
// window every time.
func TestSidecar_CloseAsTheStepIsDispatched(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, step string }{
		{"pulled", "    agent: mcp\n    instruction: do it\n"},
		{"launched", "    instruction: waitfor:never\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newTestWS(t, "")
			rw := store.Workspace{Dir: w.dir}.ForRun(tc.name)
			var asked atomic.Bool
			sc := w.startSidecar(SidecarOptions{OnChange: func() {
				if asked.Load() {
					return
				}
				st, err := (&store.StateFile{Path: rw.State}).Read()
				if err != nil || st.Run("s1").Status != planspec.StatusInProgress {
					return
				}
				asked.Store(true)
				// As CloseRun asks a live sidecar.
				if err := os.WriteFile(rw.CloseRequestPath(), []byte(time.Now().UTC().Format(time.RFC3339Nano)+"\n"), 0o644); err != nil {
					t.Error(err)
				}
			}})
			pf := testRunPlan(t, w.dir, tc.name, "name: "+tc.name+"\nsteps:\n  - id: s1\n    title: S1\n"+tc.step)
			if _, err := w.chain().Runtime.StartRun(RunStart{Plan: pf, Name: tc.name}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool {
				_, errState := os.Lstat(rw.State)
				_, errReq := os.Lstat(rw.CloseRequestPath())
				return asked.Load() && os.IsNotExist(errState) && os.IsNotExist(errReq)
			})
			if _, err := os.Lstat(rw.ClosedPath()); err != nil {
				t.Fatalf("the closed run is not archived: %v", err)
			}
			entries := journalOf(t, rw.JournalPath())
			// The journal's last word is the close; its agent ended before it.
			if n := len(entries); n == 0 || entries[n-1].Event != "run-close" {
				t.Fatalf("the run's journal does not end with its close:\n%s", journalText(entries))
			}
			var launched, exited bool
			for _, e := range entries {
				launched = launched || e.Event == "launch"
				exited = exited || e.Event == "exit"
				if e.Event == "launch" && tc.name == "launched" {
					if pid, _ := e.Detail["pid"].(float64); pid <= 0 || processExists(int(pid)) {
						t.Errorf("the run's agent (pid %v) was not stopped", e.Detail["pid"])
					}
				}
			}
			if !launched || !exited {
				t.Errorf("the try was not launched and ended (launch %v, exit %v):\n%s", launched, exited, journalText(entries))
			}
			// Nothing of the run was left to write it later: once the sidecar
			// is gone, its state is still archived, the close its last word.
			sc.stop(t)
			if _, err := os.Lstat(rw.State); err == nil {
				t.Fatalf("%s was written again after the archive", rw.State)
			}
			if after := journalOf(t, rw.JournalPath()); len(after) != len(entries) {
				t.Fatalf("the run's journal grew after its close:\n%s", journalText(after))
			}
		})
	}
}

func journalOf(t *testing.T, path string) []core.Entry {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []core.Entry
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var e core.Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, e)
	}
	return out
}

func journalText(entries []core.Entry) string {
	var b bytes.Buffer
	for _, e := range entries {
		line, _ := json.Marshal(e)
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}
