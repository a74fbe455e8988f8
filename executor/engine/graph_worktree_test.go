package engine

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// gitWS makes the test workspace a git repository with one commit, its
// state and stepseq's folder ignored.
func gitWS(t *testing.T, w *testWS) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed: %v", err)
	}
	w.writeFile(".gitignore", "state*.json\n.state*\n.stepseq/\n")
	w.writeFile("base.txt", "base\n")
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"config", "user.email", "test@example.com"},
		{"config", "user.name", "test"},
		{"add", "-A"},
		{"commit", "-q", "-m", "base"},
	} {
		gitIn(t, w.dir, args...)
	}
}

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// wtStep is a step of a worktree plan.
func wtStep(id, needs, instruction, outputs string) [3]string {
	return [3]string{id, needs, fmt.Sprintf(`"instruction":%q,"requiredOutputs":%s,"worktree":true,"merge":"auto"`, instruction, outputs)}
}

// TestSidecar_WorktreesMergedAtTheJoin runs two branches, each in its own
// worktree: their outputs are judged there (absent from the workspace until
// the join), each verified branch is committed with the report's summary, and
// at the join both are merged in plan order before the join runs, which finds
// both outputs; the worktrees and the merged branches are gone at the end.
func TestSidecar_WorktreesMergedAtTheJoin(t *testing.T) {
	rel := t.TempDir()
	a := wtStep("a", "[]", "put:a.txt=from%20a put:ra.json=%7B%22n%22:1%7D waitfor:"+filepath.Join(rel, "go"), `["a.txt"]`)
	a[2] += `,"check":"read(\"a.txt\") == \"from a\"","resultFrom":"file:ra.json","result":{"type":"object","required":["n"]}`
	w := newTestWS(t, graphPlan("", a,
		wtStep("b", "[]", "put:b.txt=from%20b waitfor:"+filepath.Join(rel, "go"), `["b.txt"]`),
		[3]string{"join", `["a","b"]`, `"instruction":"write:join.txt","requiredOutputs":["a.txt","b.txt","join.txt"]`}))
	gitWS(t, w)
	base := gitIn(t, w.dir, "rev-parse", "HEAD")
	w.startSidecar(SidecarOptions{})
	waitFor(t, func() bool {
		_, ea := os.Stat(w.path(".stepseq/worktrees/main/a/a.txt"))
		_, eb := os.Stat(w.path(".stepseq/worktrees/main/b/b.txt"))
		return ea == nil && eb == nil
	})
	if w.exists("a.txt") || w.exists("b.txt") {
		t.Fatal("a branch's output is in the workspace before its merge")
	}
	if got := gitIn(t, w.path(".stepseq/worktrees/main/a"), "rev-parse", "--abbrev-ref", "HEAD"); got != "stepseq/main/a" {
		t.Errorf("a's worktree is on %s, want stepseq/main/a", got)
	}
	if err := os.WriteFile(filepath.Join(rel, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	st := w.waitState("DONE", done)
	if r := st.Run("join"); r.Status != planspec.StatusDone || r.Tries != 1 {
		t.Fatalf("join: %s after %d tries", r.Status, r.Tries)
	}
	if got := string(st.Run("a").Result); got != `{"n":1}` {
		t.Errorf("a's result %s, want the one its worktree's file held", got)
	}
	for _, id := range []string{"a", "b"} {
		wt := st.Run(id).Agent.Worktree
		if wt == nil || wt.Branch != "stepseq/main/"+id || wt.Commit == "" || !wt.Merged {
			t.Errorf("%s's worktree record: %+v", id, wt)
		}
	}
	log := gitIn(t, w.dir, "log", "--format=%s", base+"..HEAD")
	if !strings.HasPrefix(log, "stepseq: merge stepseq/main/b at join\nstepseq: merge stepseq/main/a at join\n") {
		t.Errorf("git log:\n%s\nwant the merge of a, then of b, on top", log)
	}
	if got := gitIn(t, w.dir, "branch", "--list", "stepseq/*"); got != "" {
		t.Errorf("merged branches left: %s", got)
	}
	if w.exists(".stepseq/worktrees/main") {
		t.Error("worktrees left after the run")
	}
	if got := gitIn(t, w.dir, "worktree", "list"); strings.Count(got, "\n") != 0 {
		t.Errorf("git still lists worktrees:\n%s", got)
	}
	w.waitJournal(`"event":"worktree","step":"a"`)
}

// TestSidecar_WorktreeConflictBlocksTheJoin has two branches change one file
// two ways: the join is blocked naming the file and the branches, the
// workspace's branch is as it was (nothing half-merged), and merge: none
// leaves its branch unmerged.
func TestSidecar_WorktreeConflictBlocksTheJoin(t *testing.T) {
	w := newTestWS(t, graphPlan("",
		wtStep("a", "[]", "put:same.txt=from%20a", `["same.txt"]`),
		wtStep("b", "[]", "put:same.txt=from%20b", `["same.txt"]`),
		[3]string{"kept", "[]", `"instruction":"put:kept.txt=kept","requiredOutputs":["kept.txt"],"worktree":true,"merge":"none"`},
		[3]string{"join", `["a","b","kept"]`, `"instruction":"write:join.txt"`}))
	gitWS(t, w)
	base := gitIn(t, w.dir, "rev-parse", "HEAD")
	w.startSidecar(SidecarOptions{})
	st := w.waitState("join blocked", func(st *planspec.State) bool { return st.Run("join").Phase == planspec.PhaseBlocked })
	msg := *st.Run("join").Error
	for _, want := range []string{"merge conflict in same.txt", "stepseq/main/b", "stepseq/main/a merged", "nothing was merged"} {
		if !strings.Contains(msg, want) {
			t.Errorf("join's error %q does not say %q", msg, want)
		}
	}
	if head := gitIn(t, w.dir, "rev-parse", "HEAD"); head != base {
		t.Errorf("HEAD moved to %s: a merge was left half made", head)
	}
	if s := gitIn(t, w.dir, "status", "--porcelain"); s != "" {
		t.Errorf("the workspace is not clean:\n%s", s)
	}
	for _, b := range []string{"stepseq/main/a", "stepseq/main/b", "stepseq/main/kept"} {
		gitIn(t, w.dir, "rev-parse", "--verify", b)
	}
}

// TestApply_WorktreesNeedGit refuses a worktree plan for a workspace that is
// not a git repository, with git init as the fix.
func TestApply_WorktreesNeedGit(t *testing.T) {
	w := newTestWS(t, "")
	w.writeFile("p.yaml", "worktree: true\nsteps:\n  - {id: a, title: A, instruction: do a}\n")
	rt := w.chain().Runtime
	_, err := rt.Apply(&store.StateFile{Path: rt.WS.State}, ReadPlanFile(w.path("p.yaml"), "p.yaml"), false)
	if err == nil || !strings.Contains(err.Error(), "run git init in "+w.dir) {
		t.Fatalf("apply: %v, want a refusal that says git init", err)
	}
	if w.exists("state.json") {
		t.Error("state.json written")
	}
}

// TestSidecar_WorktreesAdoptedAfterACrash kills the sidecar while two
// branches run in their worktrees: the next start keeps (adopts) them for the
// agents still running, removes one that no step runs in, and the run ends
// with none left.
func TestSidecar_WorktreesAdoptedAfterACrash(t *testing.T) {
	rel := t.TempDir()
	w := newTestWS(t, graphPlan("",
		wtStep("a", "[]", "put:a.txt=a waitfor:"+filepath.Join(rel, "go"), `["a.txt"]`),
		wtStep("b", "[]", "put:b.txt=b waitfor:"+filepath.Join(rel, "go"), `["b.txt"]`),
		[3]string{"join", `["a","b"]`, `"instruction":"write:join.txt","requiredOutputs":["a.txt","b.txt"]`}))
	gitWS(t, w)
	first := w.startSidecarProcess()
	waitFor(t, func() bool {
		_, ea := os.Stat(w.path(".stepseq/worktrees/main/a/a.txt"))
		_, eb := os.Stat(w.path(".stepseq/worktrees/main/b/b.txt"))
		return ea == nil && eb == nil
	})
	_ = first.Process.Signal(syscall.SIGKILL)
	_ = first.Wait()
	gitIn(t, w.dir, "worktree", "add", "-q", "-b", "stray", w.path(".stepseq/worktrees/main/stray"))

	w.startSidecarProcess()
	w.waitJournal(`"event":"worktree-adopted","step":"a"`)
	w.waitJournal(`"event":"worktree-adopted","step":"b"`)
	w.waitJournal(`"event":"worktree-removed","reason":"no step still to finish runs there"`)
	if err := os.WriteFile(filepath.Join(rel, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	st := w.waitState("DONE", done)
	for _, id := range []string{"a", "b", "join"} {
		if r := st.Run(id); r.Status != planspec.StatusDone || r.Tries != 1 {
			t.Errorf("%s: %s after %d tries, want DONE after 1", id, r.Status, r.Tries)
		}
	}
	waitFor(t, func() bool { return !w.exists(".stepseq/worktrees/main") })
	if !w.exists("a.txt") || !w.exists("b.txt") {
		t.Error("the branches were not merged")
	}
	var removed int
	for _, e := range w.journal() {
		if e.Event == "worktree-removed" {
			removed++
		}
	}
	if removed < 3 {
		t.Errorf("%d worktrees removed, want 3 (a, b once committed, and the stray)", removed)
	}
}

// TestSidecar_WorktreeBranchTaken fails the try of a step whose branch name is
// taken, with git's message, and leaves the workspace as it was.
func TestSidecar_WorktreeBranchTaken(t *testing.T) {
	w := newTestWS(t, graphPlan(`"stepseq":{"maxRetries":1}`, wtStep("a", "[]", "put:a.txt=a", `["a.txt"]`)))
	gitWS(t, w)
	gitIn(t, w.dir, "branch", "stepseq/main/a")
	w.startSidecar(SidecarOptions{})
	st := w.waitState("a blocked", func(st *planspec.State) bool { return st.Run("a").Phase == planspec.PhaseBlocked })
	if msg := *st.Run("a").Error; !strings.Contains(msg, "a branch named 'stepseq/main/a' already exists") {
		t.Errorf("a's error %q does not carry git's message", msg)
	}
	if s := gitIn(t, w.dir, "status", "--porcelain"); s != "" || w.exists(".stepseq/worktrees/main/a") {
		t.Errorf("the workspace changed:\n%s", s)
	}
}
