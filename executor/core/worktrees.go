package core

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/stepseq/stepseq/planspec"
)

// Worktrees: a step with worktree: true runs each try in a git worktree of its
// own (the driver makes it as the try launches, and judges the try's outputs,
// check and result file there). Once verified, its work is committed on its
// branch (CommitWorktree), and the steps that need it wait for that commit. At
// the join, the step that needs the branches of merge: auto, they are merged
// into the workspace's branch in plan order (MergeWorktrees) before the join
// launches; a merge that fails blocks the join, nothing merged. The branches
// left at the plan's end are merged there, a failure blocking their step.

// CommitWorktree asks for a verified worktree step's work to be committed on
// its branch, with Message; the driver answers WorktreeCommitted.
type CommitWorktree struct {
	Step    string
	Try     int
	Message string
}

// MergeWorktrees asks for the branches of Steps to be merged into the
// workspace's branch, in order, for Join ("" at the plan's end); the driver
// answers WorktreesMerged.
type MergeWorktrees struct {
	Join     string
	Steps    []string
	Branches []string
}

func (CommitWorktree) isEffect() {}
func (MergeWorktrees) isEffect() {}

// WorktreeMade is the branch the driver made (or took up) for a step's try.
type WorktreeMade struct {
	Step   string
	Branch string
}

// WorktreeCommitted is the commit a verified worktree step's work made on its
// branch; Err says why none could be made.
type WorktreeCommitted struct {
	Step   string
	Try    int
	Branch string
	Commit string
	Err    error
}

// WorktreesMerged is the outcome of a MergeWorktrees: Err, when a merge
// failed, says where; Failed is the step whose branch it was.
type WorktreesMerged struct {
	Join   string
	Steps  []string
	Failed string
	Err    error
}

func (WorktreeMade) isInput()      {}
func (WorktreeCommitted) isInput() {}
func (WorktreesMerged) isInput()   {}

// StepFiles is what a Probe answers when a step's files may live apart from
// the workspace (in its worktree): what it answers of the workspace, for the
// folder step id runs in.
type StepFiles interface {
	MissingOf(id string, paths []string) []string
	ModTimeOf(id, rel string) (time.Time, bool)
	ResultFileOf(id, rel string) ([]byte, error)
}

// missing are the paths missing where step id runs.
func (m *Machine) missing(id string, paths []string) []string {
	if sf, ok := m.cfg.Probe.(StepFiles); ok && m.inWorktree(id) {
		return sf.MissingOf(id, paths)
	}
	return m.cfg.Probe.Missing(paths)
}

// modTime is a file's modification time where step id runs.
func (m *Machine) modTime(id, rel string) (time.Time, bool) {
	if sf, ok := m.cfg.Probe.(StepFiles); ok && m.inWorktree(id) {
		return sf.ModTimeOf(id, rel)
	}
	return m.cfg.Probe.ModTime(rel)
}

func (m *Machine) inWorktree(id string) bool {
	sp := m.st.Steps[id]
	return sp != nil && sp.Worktree
}

// commitVerified asks for a verified worktree step's commit.
func (m *Machine) commitVerified(id string, try int) {
	msg := ""
	if rep, ok := lastDone(m.st.Run(id), try); ok {
		msg = rep.Summary
	}
	if strings.TrimSpace(msg) == "" {
		title := id
		if sp := m.st.Steps[id]; sp != nil && sp.Title != "" {
			title = sp.Title
		}
		msg = title
	}
	m.emit(CommitWorktree{Step: id, Try: try, Message: msg + "\n\nstepseq step " + id + ", try " + fmt.Sprint(try)})
}

// worktreeMade records the branch of a step's worktree.
func (m *Machine) worktreeMade(in WorktreeMade) {
	if m.st == nil || m.st.Steps[in.Step] == nil {
		return
	}
	run := m.st.Run(in.Step)
	if run.Agent == nil {
		run.Agent = &planspec.AgentRecord{}
	}
	if w := run.Agent.Worktree; w != nil && w.Branch == in.Branch {
		return
	}
	run.Agent.Worktree = &planspec.WorktreeRecord{Branch: in.Branch}
	m.markDirty("worktree")
}

// worktreeCommitted records a verified step's commit; a commit that failed
// fails the try, retried by the usual rules.
func (m *Machine) worktreeCommitted(in WorktreeCommitted) {
	if m.st == nil || m.st.Steps[in.Step] == nil {
		return
	}
	run := m.st.Run(in.Step)
	if run.Tries != in.Try || run.Status != planspec.StatusDone {
		return
	}
	if in.Err != nil {
		msg := "commit on branch " + in.Branch + ": " + in.Err.Error()
		run.Status, run.Phase, run.Error = planspec.StatusFailed, planspec.PhasePlanned, &msg
		m.journal(Entry{Event: "worktree-commit-failed", Step: in.Step, Try: in.Try, Reason: msg})
		m.notifyEvent(in.Step, in.Try, planspec.ReportMilestone, EventTryFailed, FirstChars(msg, ErrorChars), "retry by the usual rules")
		m.markDirty("worktree commit failed")
		return
	}
	if run.Agent == nil {
		run.Agent = &planspec.AgentRecord{}
	}
	run.Agent.Worktree = &planspec.WorktreeRecord{Branch: in.Branch, Commit: in.Commit}
	m.journal(Entry{Event: "worktree-commit", Step: in.Step, Try: in.Try, Detail: map[string]any{"branch": in.Branch, "commit": in.Commit}})
	m.markDirty("worktree committed")
}

// worktreesMerged records the merge of a join's branches, or blocks the join
// (at the plan's end, the step whose branch failed) with why.
func (m *Machine) worktreesMerged(in WorktreesMerged) {
	m.merging = false
	if m.st == nil {
		return
	}
	if in.Err == nil {
		for _, id := range in.Steps {
			if run := m.st.StepRuns[id]; run != nil && run.Agent != nil && run.Agent.Worktree != nil {
				m.st.Touch(id)
				run.Agent.Worktree.Merged = true
			}
		}
		m.journal(Entry{Event: "worktree-merge", Step: in.Join, Detail: map[string]any{"steps": in.Steps}})
		m.log(slog.LevelInfo, "branches merged", "join", in.Join, "steps", in.Steps)
		m.markDirty("branches merged")
		return
	}
	held := in.Join
	if held == "" {
		held = in.Failed
	}
	if held == "" || m.st.Steps[held] == nil {
		return
	}
	text := fmt.Sprintf("%s: %v", held, in.Err)
	run := m.st.Run(held)
	run.Status, run.Phase, run.Error = planspec.StatusFailed, planspec.PhaseBlocked, &text
	run.LastRunIso = planspec.FormatISO(m.now)
	newBlocker(m.st, text)
	m.journal(Entry{Event: "worktree-merge-failed", Step: held, Reason: in.Err.Error(), Detail: map[string]any{"steps": in.Steps}})
	m.log(slog.LevelWarn, "merge at the join failed: nothing merged", "join", held, "err", in.Err)
	m.markDirty("merge failed")
}

// mergeAt asks for the merge of a join's branches, once at a time.
func (m *Machine) mergeAt(d Decision) {
	if m.merging {
		return
	}
	m.merging = true
	branches := make([]string, 0, len(d.Merge))
	for _, id := range d.Merge {
		branches = append(branches, m.st.StepRuns[id].Agent.Worktree.Branch)
	}
	m.emit(MergeWorktrees{Join: d.Step, Steps: slices.Clone(d.Merge), Branches: branches})
}

// unmerged are the worktree steps among ids whose branch waits for its merge
// (merge: auto, committed, not merged), in the order given.
func unmerged(st *planspec.State, ids []string) []string {
	var out []string
	for _, id := range ids {
		sp, run := st.Steps[id], st.StepRuns[id]
		if sp == nil || !sp.Worktree || sp.Merge == planspec.MergeNone || run == nil || run.Status != planspec.StatusDone {
			continue
		}
		if w := worktreeOf(run); w != nil && w.Commit != "" && !w.Merged {
			out = append(out, id)
		}
	}
	return out
}

// committed reports whether step id, DONE, may be built on: a worktree step
// once its work is committed, any other at once.
func committed(st *planspec.State, id string) bool {
	sp := st.Steps[id]
	if sp == nil || !sp.Worktree {
		return true
	}
	w := worktreeOf(st.StepRuns[id])
	return w != nil && w.Commit != ""
}

func worktreeOf(run *planspec.StepRun) *planspec.WorktreeRecord {
	if run == nil || run.Agent == nil {
		return nil
	}
	return run.Agent.Worktree
}
