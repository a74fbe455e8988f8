package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/store"
)

// A sandboxed agent must not start work outside its sandbox: a plan or run
// file that appears while one runs is held, not taken up, and told. It is
// taken up when it is touched again with no sandboxed agent running.

// heldFiles are the held plan and run files (workspace-relative) and their
// modification time when held.
type heldFiles map[string]time.Time

// sandboxedTry is a try whose agent runs sandboxed now: its run and step.
func (s *Sidecar) sandboxedTry() (run, step string, ok bool) {
	names := make([]string, 0, len(s.runs))
	for name := range s.runs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if a := s.runs[name].d.active; a != nil && a.launch.Sandbox != nil {
			return name, a.step, true
		}
	}
	return "", "", false
}

// hold says whether the file at rel (new or changed since it was last judged:
// fresh) is held now. A held file stays held until its modification time
// changes with no sandboxed agent running; it is told once, however often it
// is written while held.
func (s *Sidecar) hold(rel string, fresh bool) bool {
	fi, err := os.Stat(filepath.Join(s.WS.Dir, rel))
	if err != nil {
		delete(s.held, rel)
		return false
	}
	at, held := s.held[rel]
	run, step, boxed := s.sandboxedTry()
	switch {
	case held && at.Equal(fi.ModTime()):
		return true
	case !boxed:
		delete(s.held, rel)
		return false
	case !held && !fresh:
		return false
	case held:
		s.held[rel] = fi.ModTime() // written again while still held: told once
		return true
	}
	if s.held == nil {
		s.held = heldFiles{}
	}
	s.held[rel] = fi.ModTime()
	s.tellHeld(rel, run, step)
	return true
}

// tellHeld journals and notifies a held file, naming the sandboxed step and how
// to take the file up.
func (s *Sidecar) tellHeld(rel, run, step string) {
	of := "step " + step
	if run != store.MainRun {
		of += " of run " + run
	}
	msg := fmt.Sprintf("%s appeared while the sandboxed %s ran: held, not taken up (a sandboxed agent must not start work outside its sandbox)", rel, of)
	next := fmt.Sprintf("to take it up, touch %s once the step is over", rel)
	s.Logger.Warn("file held", "file", rel, "run", run, "step", step)
	s.record(core.Entry{Event: "held", Step: step, Reason: msg, Detail: map[string]any{"file": rel, "run": run, "next": next}})
	d := s.main.d
	note := core.Notification{Time: s.now(), Step: step, Who: "stepseq", Status: "milestone", Event: core.EventHeld, Output: msg, Next: next}
	if st := d.m.State(); st != nil {
		note.Plan, note.Sinks = st.Settings.Name, st.Settings.Notify
	}
	d.notify(core.Notify{Note: note})
}

// unheldPlans are the plan files to judge: the held ones left out.
func (s *Sidecar) unheldPlans(files []core.PlanFile) []core.PlanFile {
	return slices.DeleteFunc(files, func(pf core.PlanFile) bool {
		seen, ok := s.plansSeen[pf.Path]
		return s.hold(pf.Source, !ok || seen != pf.Hash)
	})
}

// unheldRuns are the new runs to take up: the held ones left out.
func (s *Sidecar) unheldRuns(names []string) []string {
	return slices.DeleteFunc(names, func(name string) bool {
		return s.hold(s.rel(store.RunStatePath(s.WS.Dir, name)), true)
	})
}
