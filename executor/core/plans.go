package core

import (
	"github.com/stepseq/stepseq/planspec"
	"github.com/stepseq/stepseq/planspec/plan"
)

// MergePlan takes a valid edit of the running plan: steps not yet started get the
// new definitions and order; steps started or finished stay as they ran, in place,
// so the cursor keeps pointing at the same step.
func MergePlan(st *planspec.State, p *plan.Plan, hash string) {
	defer st.TouchAll()
	fresh := p.State(st.Settings.Source, hash)
	started := map[string]bool{}
	var queue []string
	for i, id := range st.StepQueue {
		run, ok := st.StepRuns[id]
		if i < st.CurrentStep || (ok && (run.Tries > 0 || run.Status != planspec.StatusPending)) {
			started[id] = true
			queue = append(queue, id)
			continue
		}
		delete(st.Steps, id)
		delete(st.StepRuns, id)
	}
	for id := range started {
		if sp := st.Steps[id]; sp != nil && sp.Of != "" {
			started[sp.Of] = true // its foreach made its instances: it is not queued again
		}
	}
	for _, id := range fresh.StepQueue {
		if !started[id] {
			st.Steps[id] = fresh.Steps[id]
			queue = append(queue, id)
		}
	}
	st.StepQueue = queue
	st.StepDelayMinutes = fresh.StepDelayMinutes
	// A run that arrived through a face stays the face's through an edit: the
	// face still drives it and sees which step runs next. Its gate stays where
	// the person's yes stands.
	source, params, loops, face, gate, id := st.Settings.Source, st.Settings.Params, st.Settings.Loops, st.Settings.Face, st.Settings.Gate, st.Settings.RunID
	was := st.Settings
	st.Settings = fresh.Settings
	st.Settings.Source, st.Settings.Params, st.Settings.Loops, st.Settings.Face, st.Settings.Gate, st.Settings.RunID = source, params, loops, face, gate, id
	keepSpend(&st.Settings, was)
	plan.RenderAtStart(st)
	if st.CurrentStep < len(queue) {
		st.Status = planspec.StatusInProgress
	}
}

// MetaDir is stepseq's folder beside the state file.
const MetaDir = ".stepseq"

// PlanFile is a plan file read and judged.
type PlanFile struct {
	Path   string // absolute
	Source string // relative to the workspace, slash-separated: what state.json records
	Name   string // the record's name: the file name without .yaml / .plan.yaml
	Hash   string
	Plan   *plan.Plan // nil when invalid
	Err    error      // why it is invalid
	// Params are the params a run of it is given (apply --param); nil: the
	// defaults, as for a plan dropped in plans/.
	Params map[string]any

	// Resolved are Params checked against the plan's, defaults filled in.
	Resolved map[string]any
	// Face is the face the plan arrived through ("mcp"), which its state
	// keeps (Settings.Face); "" for a plan of the workspace's.
	Face string
	// Budget, when not zero, bounds the run in place of the plan's budget:
	// each bound it sets replaces the plan's (apply --budget, run_start).
	Budget planspec.Budget
}

// RunBudget is the budget a run of pf starts with: the plan's, each bound
// that pf.Budget sets replaced.
func (pf PlanFile) RunBudget() planspec.Budget {
	b := pf.Plan.Budget
	if pf.Budget.USD > 0 {
		b.USD = pf.Budget.USD
	}
	if pf.Budget.Tokens > 0 {
		b.Tokens = pf.Budget.Tokens
	}
	if pf.Budget.Tries > 0 {
		b.Tries = pf.Budget.Tries
	}
	if pf.Budget.Wall > 0 {
		b.Wall = pf.Budget.Wall
	}
	return b
}

// PlanRecord is .stepseq/plans/<name>.json: the verdict on a plan file's latest
// content, for the agent that dropped it, and the hash last applied, so that a
// restart never applies the same content twice.
type PlanRecord struct {
	File        string   `json:"file"`
	Hash        string   `json:"hash"`
	Status      string   `json:"status"` // invalid, waiting, active, finished
	Errors      []string `json:"errors,omitempty"`
	AppliedHash string   `json:"appliedHash,omitempty"`
	JudgedAt    string   `json:"judgedAt"`
}

// Plan record statuses.
const (
	PlanInvalid  = "invalid"
	PlanWaiting  = "waiting"
	PlanActive   = "active"
	PlanFinished = "finished"
)

// ActivePlan is what the state says of the plan it runs, as plan intake needs it.
type ActivePlan struct {
	Present bool   // a valid state exists
	Source  string // the plan file it came from; "" for a hand-written state
	Hash    string // the content applied
	Done    bool   // the plan is DONE
	// Missing is true when there is no state file at all: the run of a plan whose
	// record still says active went with it, and the plan is applied again as new.
	Missing bool
}

// holds reports whether the state came from pf's file with pf's very content.
func (a ActivePlan) holds(pf PlanFile) bool {
	return a.Present && a.Source == pf.Source && a.Hash == pf.Hash
}

// PlanUpdate is one plan record to write.
type PlanUpdate struct {
	File    PlanFile
	Status  string
	Applied string // "" keeps the record's applied hash
	Reject  bool   // newly judged invalid: say so in the log and the journal
}

// PlanIntake is what to do with the plan files in the folder.
type PlanIntake struct {
	Updates []PlanUpdate
	Edit    *PlanFile // a valid edit of the active plan
	Apply   *PlanFile // the plan to apply now
	// Finish names the previous plan whose record still says active.
	Finish string
	// Again is true when Apply is the active plan applied again as new because
	// its state file was removed (not a plan's first run).
	Again bool
}

// ChoosePlans decides plan intake without I/O: the first valid plan file not applied
// before becomes the state when no plan is in progress and no try is in flight;
// others wait their turn in file-name order; a valid edit of the active plan is
// taken for the steps not started; an invalid file is recorded and leaves the state
// alone. files are sorted by path; recs are the plan records by name; seen maps a
// path to the content hash already judged.
func ChoosePlans(files []PlanFile, recs map[string]PlanRecord, seen map[string]string, active ActivePlan, busy bool) PlanIntake {
	var out PlanIntake
	var next *PlanFile
	nextGone := false
	for i := range files {
		pf := files[i]
		rec := recs[pf.Name]
		// The state holding this very content is this plan applied, whatever
		// its record says: a stepseq killed between the state's write and the
		// record's left no record, or an older one.
		inState := pf.Plan != nil && active.holds(pf)
		applied := rec.AppliedHash
		if inState {
			applied = pf.Hash
		}
		if h, ok := seen[pf.Path]; !ok || h != pf.Hash { // a refused file has no hash, and is judged too
			status := judgedStatus(pf, rec, active.Done, inState)
			out.Updates = append(out.Updates, PlanUpdate{File: pf, Status: status, Applied: applied, Reject: pf.Plan == nil})
		}
		if pf.Plan == nil {
			continue
		}
		isActive := active.Present && active.Source == pf.Source
		gone := active.Missing && rec.Status == PlanActive && rec.AppliedHash == pf.Hash
		switch {
		case isActive && !active.Done:
			if active.Hash != pf.Hash {
				p := pf
				out.Edit = &p
				out.Updates = append(out.Updates, PlanUpdate{File: pf, Status: PlanActive, Applied: pf.Hash})
			}
		case applied == pf.Hash && !gone:
			// Applied before: a restart never applies the same content twice.
			if isActive && rec.Status == PlanActive {
				out.Updates = append(out.Updates, PlanUpdate{File: pf, Status: PlanFinished, Applied: rec.AppliedHash})
			}
		case next == nil:
			p := pf
			next, nextGone = &p, gone
		default:
			out.Updates = append(out.Updates, PlanUpdate{File: pf, Status: PlanWaiting, Applied: rec.AppliedHash})
		}
	}
	if next != nil {
		out.takeTurn(next, nextGone, recs, active, busy)
	}
	return out
}

// judgedStatus is the status a plan file's record takes when its content is
// judged: invalid, the state's own plan (active, or finished once done), the
// status its record gave this same content before, else waiting.
func judgedStatus(pf PlanFile, rec PlanRecord, done, inState bool) string {
	switch {
	case pf.Plan == nil:
		return PlanInvalid
	case inState:
		// The running plan's own content, back after an edit: its record
		// says so, not the verdict on the edit.
		if done {
			return PlanFinished
		}
		return PlanActive
	case rec.AppliedHash == pf.Hash && (rec.Status == PlanActive || rec.Status == PlanFinished):
		return rec.Status
	}
	return PlanWaiting
}

// takeTurn gives next, the first plan file not applied before, its turn: it
// waits while a plan is in progress or a try is in flight, else it is applied
// and the previous plan's record, if it still says active, is finished.
func (out *PlanIntake) takeTurn(next *PlanFile, nextGone bool, recs map[string]PlanRecord, active ActivePlan, busy bool) {
	if active.Present && !active.Done || busy {
		if !nextGone { // a gone plan's record stays active until it is applied again
			out.Updates = append(out.Updates, PlanUpdate{File: *next, Status: PlanWaiting})
		}
		return
	}
	out.Apply, out.Again = next, nextGone
	if active.Present && active.Source != "" {
		name := plan.PlanName(active.Source)
		if rec, ok := recs[name]; ok && rec.Status == PlanActive {
			out.Finish = name
		}
	}
}
