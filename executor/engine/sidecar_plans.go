package engine

import (
	"cmp"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// intakePlans reads the plan files, lets ChoosePlans decide, and carries it out.
func (s *Sidecar) intakePlans() {
	files, recs, unsettled, ok := s.readPlans()
	if !ok {
		return
	}
	if !unsettled.IsZero() {
		// Once the rest is done: the machine's timer is the last it sets.
		defer s.main.d.feed(core.PlanWriting{Modified: unsettled})
	}
	files = s.unheldPlans(files)
	m := s.main.d.m
	choice := core.ChoosePlans(files, recs, s.plansSeen, s.activePlan(), m.Busy() || m.StateInvalid() != nil)
	for _, pf := range files {
		s.plansSeen[pf.Path] = pf.Hash
	}
	if choice.Edit != nil {
		s.main.d.feed(core.PlanEdited{Plan: choice.Edit.Plan, Hash: choice.Edit.Hash})
	}
	s.noteRefused(files, choice)
	for _, u := range choice.Updates {
		if u.Reject {
			s.rejectPlan(u.File, ErrorLines(u.File.Err))
		}
		s.setRecord(u.File, u.Status, u.Applied)
	}
	if choice.Apply != nil {
		s.applyPlan(choice)
	}
}

// readPlans reads the plan files of the folder, each judged (parsed, its
// agents admitted) and sorted by path, and the records of their names. A file
// still being written is left for later: unsettled is the earliest time of
// those, for the machine to ask for another intake once they are still.
// false: the folder cannot be read.
func (s *Sidecar) readPlans() (files []core.PlanFile, recs map[string]core.PlanRecord, unsettled time.Time, ok bool) {
	entries, err := os.ReadDir(s.opt.PlansDir)
	if err != nil {
		return nil, nil, unsettled, false
	}
	recs = map[string]core.PlanRecord{}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || strings.HasPrefix(n, ".") || !(strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
			continue
		}
		pf, ok := s.readPlan(filepath.Join(s.opt.PlansDir, n), &unsettled)
		if !ok {
			continue
		}
		files = append(files, pf)
		if rec, ok := s.WS.ReadPlanRecord(pf.Name); ok {
			recs[pf.Name] = rec
		}
	}
	slices.SortFunc(files, func(a, b core.PlanFile) int { return strings.Compare(a.Path, b.Path) })
	return files, recs, unsettled, true
}

// readPlan reads and judges the plan file at path; false when it is gone, or
// does not parse and may still be being written.
func (s *Sidecar) readPlan(path string, unsettled *time.Time) (core.PlanFile, bool) {
	pf := ReadPlanFileIn(s.Root(), s.rel(path))
	if pf.Plan != nil {
		s.submitted(&pf, s.main.d.m.State())
	}
	pf = s.AdmitPlan(pf, FromWorkspace)
	if errors.Is(pf.Err, fs.ErrNotExist) {
		return pf, false
	}
	if pf.Plan == nil && s.beingWritten(path, unsettled) {
		return pf, false // judged once its writer is done: cp makes an empty file first
	}
	if err, ok := s.plansTooBig[[2]string{pf.Path, pf.Hash}]; ok {
		pf.Plan, pf.Err = nil, err
	}
	return pf, true
}

// activePlan is what ChoosePlans needs to know of the main run's state.
func (s *Sidecar) activePlan() core.ActivePlan {
	m := s.main.d.m
	switch st := m.State(); {
	case st != nil && m.StateInvalid() == nil:
		return core.ActivePlan{Present: true, Source: st.Settings.Source, Hash: st.Settings.Hash, Done: st.Status == planspec.StatusDone}
	case st == nil && m.StateInvalid() == nil:
		return core.ActivePlan{Missing: true}
	}
	return core.ActivePlan{}
}

// noteRefused keeps why the folder's plans were refused when there is no
// state and nothing to apply: with --exit-when-done that is the end; a plan
// dropped later is judged too.
func (s *Sidecar) noteRefused(files []core.PlanFile, choice core.PlanIntake) {
	s.refused = nil
	if choice.Apply != nil || s.main.d.m.State() != nil || slices.ContainsFunc(choice.Updates, func(u core.PlanUpdate) bool { return u.Status == core.PlanWaiting }) {
		return
	}
	for _, pf := range files {
		if pf.Plan == nil {
			s.refused = errors.Join(s.refused, pf.Err)
		}
	}
}

// rejectPlan logs and journals a plan file refused, its errors in lines.
func (s *Sidecar) rejectPlan(pf core.PlanFile, errs []string) {
	s.Logger.Error("plan rejected; state.json is untouched", "file", pf.Source, "errors", strings.Join(errs, "; "))
	s.record(core.Entry{Event: "plan", Reason: "rejected", Detail: map[string]any{"file": pf.Source, "errors": errs}})
}

// applyPlan hands the machine the plan chosen to apply.
func (s *Sidecar) applyPlan(choice core.PlanIntake) {
	if choice.Finish != "" {
		if prev, ok := s.WS.ReadPlanRecord(choice.Finish); ok {
			prev.Status = core.PlanFinished
			_ = s.WS.WritePlanRecord(choice.Finish, prev)
		}
	}
	st, archived, err := s.PreparePlan(s.main.d.sf, *choice.Apply, true)
	if errors.Is(err, store.ErrStateTooBig) {
		// Refused for good, with the figure: the file is judged again when it changes.
		pf := *choice.Apply
		pf.Plan, pf.Err = nil, err
		s.plansTooBig[[2]string{pf.Path, pf.Hash}] = err
		s.rejectPlan(pf, ErrorLines(err))
		s.setRecord(pf, core.PlanInvalid, "")
		return
	}
	if err != nil {
		s.Logger.Error("applying plan", "file", choice.Apply.Source, "err", err)
		return
	}
	s.Logger.Info("plan applied", "file", choice.Apply.Source, "steps", len(st.StepQueue), "archived", archived)
	if choice.Again {
		s.Logger.Info("state.json was removed: the plan runs again as new", "file", choice.Apply.Source)
	}
	// The machine writes it: one writer of state.json, with its rules for a
	// Write that fails. The journal and the plan's record say it is applied
	// once state.json holds it (planWritten): a record saying so over a state
	// that does not would keep a restarted sidecar from ever applying it, and
	// a state that holds it without the record is taken as applied
	// (ChoosePlans).
	s.applying = &applying{file: *choice.Apply, archived: archived}
	s.main.d.feed(core.PlanApplied{State: st, Source: choice.Apply.Source})
}

// submitted fills in what a face handed in with plan file pf: the params of
// its run and the face, bound to its content's hash. An edit of the file of
// run, the plan in progress, is judged as the run is, whoever makes it: one
// that arrived through a face stays bound by --expose-env.
func (s *Sidecar) submitted(pf *core.PlanFile, run *planspec.State) {
	sub, _ := s.WS.Submitted(pf.Name, pf.Hash)
	pf.Params, pf.Face = sub.Params, sub.Face
	if run != nil && run.Status != planspec.StatusDone && run.Settings.Source == pf.Source {
		pf.Face = cmp.Or(run.Settings.Face, pf.Face)
	}
}

// applying is a plan handed to the machine whose state is not written yet.
type applying struct {
	file     core.PlanFile
	archived string // where the state it replaces went
}

// planWritten follows every state write of the workspace's own run: the first
// that holds the plan being applied, made durable, is when the journal and the
// plan's record say it is applied.
func (s *Sidecar) planWritten(st *planspec.State) {
	p := s.applying
	if p == nil || st.Settings.Source != p.file.Source || st.Settings.Hash != p.file.Hash {
		return
	}
	s.applying = nil
	if err := s.main.d.sf.Sync(); err != nil {
		s.Logger.Error("state written but its folder not synced: a power cut may bring the previous state back", "err", err)
		s.record(core.Entry{Event: "write-error", Reason: err.Error()})
	}
	s.recordApplied(p.file, p.archived)
	s.setRecord(p.file, core.PlanActive, p.file.Hash)
}

// keepRemoved keeps the run whose state.json was removed in the history, as the
// machine last held it, so that `stepseq history` still shows it.
func (s *Sidecar) keepRemoved(st *planspec.State) {
	path, err := s.WS.Archive(st.Marshal(), st.Settings.Name)
	if err != nil {
		s.Logger.Warn("state.json removed; its run could not be kept in the history", "err", err)
		return
	}
	s.Logger.Info("state.json removed; its run is kept in the history", "archived", path)
}

func (s *Sidecar) setRecord(pf core.PlanFile, status, applied string) {
	rec := core.PlanRecord{File: pf.Source, Hash: pf.Hash, Status: status, Errors: ErrorLines(pf.Err),
		AppliedHash: applied, JudgedAt: planspec.FormatISO(time.Now())}
	if old, ok := s.WS.ReadPlanRecord(pf.Name); ok && applied == "" {
		rec.AppliedHash = old.AppliedHash
	}
	if err := s.WS.WritePlanRecord(pf.Name, rec); err != nil {
		s.Logger.Warn("plan record", "err", err)
	}
}

// beingWritten reports whether the file at path may still be being written
// (the machine's PlanSettling, on the clock the machine's inputs carry), and then keeps
// its time in unsettled: the machine is told, and asks for another intake once
// the file has been still long enough.
func (s *Sidecar) beingWritten(path string, unsettled *time.Time) bool {
	fi, err := os.Stat(path)
	if err != nil || !s.main.d.m.PlanSettling(s.now(), fi.ModTime()) {
		return false
	}
	if unsettled.IsZero() || fi.ModTime().Before(*unsettled) {
		*unsettled = fi.ModTime()
	}
	return true
}
