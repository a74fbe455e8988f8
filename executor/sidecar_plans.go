package executor

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/stepseq/stepseq/planspec"
)

// intakePlans judges every plan file in the plans folder and applies the next one
// when no plan is in progress, or takes a valid edit of the running one.
func (s *Sidecar) intakePlans() {
	entries, err := os.ReadDir(s.opt.PlansDir)
	if err != nil {
		return
	}
	var files []string
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() && !strings.HasPrefix(n, ".") && (strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
			files = append(files, filepath.Join(s.opt.PlansDir, n))
		}
	}
	slices.Sort(files)
	var next *PlanFile
	for _, path := range files {
		pf := ReadPlanFileIn(s.Root(), s.rel(path))
		if errors.Is(pf.Err, fs.ErrNotExist) {
			continue
		}
		rec, _ := s.WS.ReadPlanRecord(pf.Name)
		if seen, ok := s.plansSeen[path]; !ok || seen != pf.Hash { // a refused file has no hash, and is judged too
			s.plansSeen[path] = pf.Hash
			s.judged(pf, rec)
		}
		if pf.Plan == nil {
			continue
		}
		active := s.st != nil && s.st.Settings.Source == pf.Source
		switch {
		case active && s.st.Status != planspec.StatusDone:
			if s.st.Settings.Hash != pf.Hash {
				MergePlan(s.st, pf.Plan, pf.Hash)
				s.adopt(s.st)
				s.write("plan edited: steps not started take the new definition")
				s.Logger.Info("plan edit applied to the steps not started", "file", pf.Source)
				s.setRecord(pf, PlanActive, pf.Hash)
			}
		case rec.AppliedHash == pf.Hash:
			// Applied before: a restart never applies the same content twice.
			if active && rec.Status == PlanActive {
				s.setRecord(pf, PlanFinished, rec.AppliedHash)
			}
		case next == nil:
			p := pf
			next = &p
		default:
			s.setRecord(pf, PlanWaiting, rec.AppliedHash)
		}
	}
	if next == nil {
		return
	}
	if s.st != nil && s.st.Status != planspec.StatusDone || s.bad != nil || s.active != nil || s.awaiting != nil {
		s.setRecord(*next, PlanWaiting, "")
		return
	}
	if s.st != nil && s.st.Settings.Source != "" {
		if prev, ok := s.WS.ReadPlanRecord(planspec.PlanName(s.st.Settings.Source)); ok && prev.Status == PlanActive {
			prev.Status = PlanFinished
			_ = s.WS.WritePlanRecord(planspec.PlanName(s.st.Settings.Source), prev)
		}
	}
	st, archived, err := s.ApplyPlan(s.sf, *next, true)
	if err != nil {
		s.Logger.Error("applying plan", "file", next.Source, "err", err)
		return
	}
	s.Logger.Info("plan applied", "file", next.Source, "steps", len(st.StepQueue), "archived", archived)
	s.adopt(st)
	s.setRecord(*next, PlanActive, next.Hash)
}

// judged records a plan file's verdict for the agent that dropped it. Content
// applied before keeps its standing (active or finished).
func (s *Sidecar) judged(pf PlanFile, rec PlanRecord) {
	status := PlanWaiting
	switch {
	case pf.Plan == nil:
		status = PlanInvalid
		s.Logger.Error("plan rejected; state.json is untouched", "file", pf.Source, "errors", strings.Join(ErrorLines(pf.Err), "; "))
		s.record(Entry{Event: "plan", Reason: "rejected", Detail: map[string]any{"file": pf.Source, "errors": ErrorLines(pf.Err)}})
	case rec.AppliedHash == pf.Hash && (rec.Status == PlanActive || rec.Status == PlanFinished):
		status = rec.Status
	}
	s.setRecord(pf, status, rec.AppliedHash)
}

func (s *Sidecar) setRecord(pf PlanFile, status, applied string) {
	rec := PlanRecord{File: pf.Source, Hash: pf.Hash, Status: status, Errors: ErrorLines(pf.Err),
		AppliedHash: applied, JudgedAt: planspec.FormatISO(time.Now())}
	if old, ok := s.WS.ReadPlanRecord(pf.Name); ok && applied == "" {
		rec.AppliedHash = old.AppliedHash
	}
	if err := s.WS.WritePlanRecord(pf.Name, rec); err != nil {
		s.Logger.Warn("plan record", "err", err)
	}
}
