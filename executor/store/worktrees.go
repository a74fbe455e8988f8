package store

import (
	"path/filepath"
	"strconv"

	"github.com/stepseq/stepseq/planspec"
)

// WorktreesDir holds the run's git worktrees, one per step instance that runs
// in one (worktree: true): .stepseq/worktrees/RUN/, the workspace's own run
// being main, as in the branches' names (stepseq/RUN/STEP).
func (w Workspace) WorktreesDir() string {
	run := w.Run
	if run == "" {
		run = MainRun
	}
	return w.meta("worktrees", run)
}

// WorktreePath is step id's worktree: instance i of a foreach step is STEP-i,
// as its branch is.
func (w Workspace) WorktreePath(id string) string {
	leaf := id
	if of, i, ok := planspec.SplitInstance(id); ok {
		leaf = of + "-" + strconv.Itoa(i)
	}
	return filepath.Join(w.WorktreesDir(), safeName(leaf))
}
