package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// The driver's part of worktrees (core/worktrees.go says the rules): it makes
// a step's worktree as its try launches and runs the agent there, judges the
// try's files there, commits, merges and removes, and, once per start, takes
// up the worktrees a stepseq before it left: those of steps still to finish are
// kept for their next try, every other one is removed. The journal names each
// worktree made, kept and removed.

// worktreeRoots are the worktrees opened as roots, by folder, for judging a
// step's files there.
type worktreeRoots struct {
	mu    sync.Mutex
	roots map[string]*os.Root
}

// rootOf is the worktree at path opened as a root; nil when it is not there.
func (w *worktreeRoots) rootOf(path string) *os.Root {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r := w.roots[path]; r != nil {
		return r
	}
	r, err := os.OpenRoot(path)
	if err != nil {
		return nil
	}
	if w.roots == nil {
		w.roots = map[string]*os.Root{}
	}
	w.roots[path] = r
	return r
}

// forget closes the root of a worktree being removed.
func (w *worktreeRoots) forget(path string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r := w.roots[path]; r != nil {
		r.Close()
		delete(w.roots, path)
	}
}

func (w *worktreeRoots) closeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for p, r := range w.roots {
		r.Close()
		delete(w.roots, p)
	}
}

// worktreeOf is step id's worktree: its folder and its branch.
func (d *driver) worktreeOf(id string) proc.Worktree {
	return proc.Worktree{Path: d.rt.WS.WorktreePath(id), Branch: planspec.BranchName(d.rt.WS.Run, id)}
}

// stepRoot is the root step id's files are judged in: its worktree while
// there is one, else the workspace.
func (r *Runtime) stepRoot(st *planspec.State, id string) *os.Root {
	if sp := st.Steps[id]; sp != nil && sp.Worktree {
		if root := r.wt.rootOf(r.WS.WorktreePath(id)); root != nil {
			return root
		}
	}
	return r.Root()
}

// makeWorktree makes (or takes up) the worktree the try of step l.Step runs
// in, cut from the commit its needs left, and returns its folder; "" when
// the step runs in the workspace.
func (d *driver) makeWorktree(st *planspec.State, l core.StartAgent) (string, error) {
	sp := st.Steps[l.Step]
	if sp == nil || !sp.Worktree || st.IsPull(l.Step) {
		return "", nil
	}
	w := d.worktreeOf(l.Step)
	base, err := d.worktreeBase(st, l.Step)
	if err != nil {
		return "", fmt.Errorf("worktree for %s: %w", l.Step, err)
	}
	w.Base = base
	own := false
	if run := st.StepRuns[l.Step]; run != nil && run.Agent != nil && run.Agent.Worktree != nil {
		own = run.Agent.Worktree.Branch == w.Branch
	}
	if err := proc.AddWorktree(d.rt.WS.Dir, w, own); err != nil {
		return "", fmt.Errorf("worktree for %s: %w", l.Step, err)
	}
	d.rt.record(core.Entry{Event: "worktree", Step: l.Step, Try: l.Try, Detail: map[string]any{"path": d.rel(w.Path), "branch": w.Branch, "base": w.Base}})
	d.feed(core.WorktreeMade{Step: l.Step, Branch: w.Branch})
	return w.Path, nil
}

// worktreeBase is the commit a step's branch is cut from: the commit of the
// one worktree step it needs whose branch is left unmerged (merge: none),
// else the workspace's HEAD, which holds its needs' merged branches.
func (d *driver) worktreeBase(st *planspec.State, id string) (string, error) {
	x := st.Index()
	for _, n := range x.NeedsOf(st, id) {
		sp, run := st.Steps[n], st.StepRuns[n]
		if sp != nil && sp.Worktree && sp.Merge == planspec.MergeNone && run != nil && run.Agent != nil &&
			run.Agent.Worktree != nil && run.Agent.Worktree.Commit != "" {
			return run.Agent.Worktree.Commit, nil
		}
	}
	return proc.HeadCommit(d.rt.WS.Dir)
}

// worktreeEffect carries out the machine's CommitWorktree or MergeWorktrees.
func (d *driver) worktreeEffect(e core.Effect) {
	switch e := e.(type) {
	case core.CommitWorktree:
		d.commitWorktree(e)
	case core.MergeWorktrees:
		d.mergeWorktrees(e)
	}
}

// sweepDone removes the run's worktrees once a write recorded it DONE: none
// is needed any more.
func (d *driver) sweepDone(st *planspec.State, err error) {
	if err == nil && st.Status == planspec.StatusDone {
		d.sweepWorktrees(st)
	}
}

// commitWorktree commits a verified step's work on its branch and removes
// its worktree, the branch kept for the join.
func (d *driver) commitWorktree(e core.CommitWorktree) {
	w := d.worktreeOf(e.Step)
	in := core.WorktreeCommitted{Step: e.Step, Try: e.Try, Branch: w.Branch}
	in.Commit, in.Err = proc.CommitWorktree(w.Path, e.Message)
	if in.Err == nil {
		d.removeWorktree(e.Step, w.Path, "committed on "+w.Branch)
	}
	d.feed(in)
}

// mergeWorktrees merges a join's branches into the workspace's branch, in
// order, and deletes them once merged.
func (d *driver) mergeWorktrees(e core.MergeWorktrees) {
	in := core.WorktreesMerged{Join: e.Join, Steps: e.Steps}
	join := e.Join
	if join == "" {
		join = "the plan's end"
	}
	err := proc.MergeBranches(d.rt.WS.Dir, e.Branches, func(b string) string {
		return fmt.Sprintf("stepseq: merge %s at %s", b, join)
	})
	var c *proc.Conflict
	if errors.As(err, &c) {
		for i, b := range e.Branches {
			if b == c.Branch {
				in.Failed = e.Steps[i]
			}
		}
	}
	in.Err = err
	if err == nil {
		for _, b := range e.Branches {
			if derr := proc.DeleteBranch(d.rt.WS.Dir, b); derr != nil {
				d.rt.Logger.Warn("a merged branch was kept", "branch", b, "err", derr)
			}
		}
	}
	d.feed(in)
}

// removeWorktree removes step id's worktree at path, journaled with why.
func (d *driver) removeWorktree(id, path, why string) {
	d.rt.wt.forget(path)
	if err := proc.RemoveWorktree(d.rt.WS.Dir, path); err != nil {
		d.rt.Logger.Warn("a worktree could not be removed", "step", id, "path", path, "err", err)
		return
	}
	d.rt.record(core.Entry{Event: "worktree-removed", Step: id, Reason: why, Detail: map[string]any{"path": d.rel(path)}})
}

// sweepWorktrees takes up the run's worktrees as the state st says: the
// worktree of a step still to finish is kept for its next try (adopted),
// every other one is removed. A nil st (the run closed) removes them all.
func (d *driver) sweepWorktrees(st *planspec.State) {
	dirs := proc.Worktrees(d.rt.WS.WorktreesDir())
	defer d.dropEmptyWorktreeDirs()
	if len(dirs) == 0 {
		return
	}
	keep := map[string]string{}
	if st != nil && st.Status != planspec.StatusDone {
		for _, id := range st.StepQueue {
			sp, run := st.Steps[id], st.StepRuns[id]
			if sp != nil && sp.Worktree && (run == nil || run.Status != planspec.StatusDone) {
				keep[d.rt.WS.WorktreePath(id)] = id
			}
		}
	}
	for _, dir := range dirs {
		if id, ok := keep[dir]; ok {
			d.rt.record(core.Entry{Event: "worktree-adopted", Step: id, Reason: "its step is still to finish: its next try runs there",
				Detail: map[string]any{"path": d.rel(dir)}})
			continue
		}
		why := "the run is over"
		if st != nil && st.Status != planspec.StatusDone {
			why = "no step still to finish runs there"
		}
		d.removeWorktree("", dir, why)
	}
}

// dropEmptyWorktreeDirs removes the run's worktree folder, and the folder of
// all runs' worktrees, once nothing is in them.
func (d *driver) dropEmptyWorktreeDirs() {
	dir := d.rt.WS.WorktreesDir()
	for _, p := range []string{dir, filepath.Dir(dir)} {
		if entries, err := os.ReadDir(p); err == nil && len(entries) == 0 {
			_ = os.Remove(p)
		}
	}
}

// rel is a path of the workspace, relative to it.
func (d *driver) rel(p string) string {
	if r, err := filepath.Rel(d.rt.WS.Dir, p); err == nil {
		return filepath.ToSlash(r)
	}
	return p
}

// MissingOf are the paths missing where step id runs (core.StepFiles).
func (d *driver) MissingOf(id string, paths []string) []string {
	return proc.MissingIn(d.rt.stepRoot(d.m.State(), id), paths)
}

// ModTimeOf is a file's modification time where step id runs.
func (d *driver) ModTimeOf(id, rel string) (time.Time, bool) {
	root := d.rt.stepRoot(d.m.State(), id)
	if root == nil {
		return time.Time{}, false
	}
	fi, err := root.Stat(filepath.FromSlash(rel))
	if err != nil || fi.IsDir() {
		return time.Time{}, false
	}
	return fi.ModTime(), true
}

// ResultFileOf reads step id's result file where it runs.
func (d *driver) ResultFileOf(id, rel string) ([]byte, error) {
	data, err := store.ReadFileIn(d.rt.stepRoot(d.m.State(), id), rel, proc.ResultCap)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s does not exist: the agent wrote no result there", rel)
	}
	return data, err
}

// CheckWorktrees refuses a plan whose steps run in worktrees for a workspace
// that is not a git repository with a commit: the refusal says git init.
func CheckWorktrees(uses bool, dir string) error {
	if !uses {
		return nil
	}
	return proc.GitRepo(dir)
}
