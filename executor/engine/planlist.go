package engine

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
	planpkg "github.com/stepseq/stepseq/planspec/plan"
)

// PlanListing is one plan as `stepseq list` and `stepseq status` show it: the
// file in the plans folder, what the sidecar last decided about it, and, for a
// rejected plan, why.
type PlanListing struct {
	Name   string   `json:"name"`   // the plan's name: (default the file's name), as status and history say it
	File   string   `json:"file"`   // relative to the workspace, slash-separated
	Status string   `json:"status"` // active, queued, rejected, finished, or new (not judged yet)
	Errors []string `json:"errors,omitempty"`
	// ErrorCount is len(Errors); the text keeps its own count for a cut list.
	ErrorCount int    `json:"errorCount,omitempty"`
	JudgedAt   string `json:"judgedAt,omitempty"`
}

// A plan listing's statuses, the words `list` (its table and --json) and
// `status` say: the record's own words (core.PlanWaiting, core.PlanInvalid) are
// those of the files under .stepseq/plans/, kept as they were written.
const (
	PlanActive   = core.PlanActive
	PlanQueued   = "queued"   // valid, waiting for the active plan to finish (record: waiting)
	PlanRejected = "rejected" // not valid, with its errors (record: invalid)
	PlanFinished = core.PlanFinished
	PlanNew      = "new" // a plan file that no sidecar has judged yet
)

// listingStatus is a plan record's status as a listing says it.
func listingStatus(record string) string {
	switch record {
	case core.PlanWaiting:
		return PlanQueued
	case core.PlanInvalid:
		return PlanRejected
	}
	return record
}

// ListPlans lists the plans of a workspace from the plan files in plansDir and the
// records under .stepseq/plans/, sorted by name. A record whose plan file is gone
// is left out, as the sidecar forgets it too. A file with no record is judged here,
// read-only: a rejected plan is shown as rejected even before a sidecar sees it.
// st, when not nil, is the workspace's state: its plan is active until DONE.
func ListPlans(ws store.Workspace, plansDir string, st *planspec.State) ([]PlanListing, error) {
	entries, err := os.ReadDir(plansDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var out []PlanListing
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || strings.HasPrefix(n, ".") || !(strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
			continue
		}
		path := filepath.Join(plansDir, n)
		source := n
		if rel, err := filepath.Rel(ws.Dir, absPath(path)); err == nil && filepath.IsLocal(rel) {
			source = filepath.ToSlash(rel)
		}
		l := PlanListing{Name: planpkg.PlanName(n), File: source}
		rec, ok := ws.ReadPlanRecord(l.Name)
		// The plan is named as status and history name it: by its name:, which
		// defaults to the file's name.
		pf := ReadPlanFile(path, source)
		if pf.Plan != nil && pf.Plan.Name != "" {
			l.Name = pf.Plan.Name
		}
		switch {
		case ok:
			l.Status, l.Errors, l.JudgedAt = listingStatus(rec.Status), rec.Errors, rec.JudgedAt
			if rec.Status == core.PlanActive && st == nil && !fileExists(ws.State) {
				// Its run went with state.json: a sidecar applies it again as new.
				l.Status = PlanQueued
			}
		default:
			l.Status = PlanNew
			if pf.Plan == nil {
				l.Status, l.Errors = PlanRejected, ErrorLines(pf.Err)
			}
		}
		if st != nil && st.Settings.Source == source {
			l.Status = PlanActive
			if st.Status == planspec.StatusDone {
				l.Status = PlanFinished
			}
		}
		l.ErrorCount = len(l.Errors)
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// HistoryRun is one finished or archived run under .stepseq/history/.
type HistoryRun struct {
	File      string `json:"file"` // the archive's path
	Plan      string `json:"plan"`
	Archived  string `json:"archivedIso"` // when the state was archived, from the file name
	Status    string `json:"status"`
	StepsDone int    `json:"stepsDone"`
	Steps     int    `json:"steps"`
	Error     string `json:"error,omitempty"` // the archive does not parse
}

// History lists the runs archived under .stepseq/history/, oldest first. Archive
// names start with the UTC time of archiving, so the name order is the time order.
func History(ws store.Workspace) ([]HistoryRun, error) {
	entries, err := os.ReadDir(ws.HistoryDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []HistoryRun
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || strings.HasPrefix(n, ".") || !strings.HasSuffix(n, ".json") {
			continue
		}
		path := filepath.Join(ws.HistoryDir(), n)
		h := HistoryRun{File: path}
		stamp, name, _ := strings.Cut(strings.TrimSuffix(n, ".json"), "-")
		h.Plan = name
		if t, err := timeFromArchiveName(stamp); err == nil {
			h.Archived = planspec.FormatISO(t)
		}
		data, err := (&store.StateFile{Path: path}).Bytes()
		if err != nil {
			h.Error = err.Error()
			out = append(out, h)
			continue
		}
		st, err := planspec.ParseState(bytes.NewReader(data), n)
		if err != nil {
			h.Error = firstErrLine(err)
			out = append(out, h)
			continue
		}
		if st.Settings.Name != "" {
			h.Plan = st.Settings.Name
		}
		h.Status, h.Steps = st.Status, len(st.StepQueue)
		for _, id := range st.StepQueue {
			if run := st.StepRuns[id]; run != nil && run.Status == planspec.StatusDone {
				h.StepsDone++
			}
		}
		out = append(out, h)
	}
	return out, nil
}

func firstErrLine(err error) string {
	line, _, _ := strings.Cut(strings.TrimSpace(err.Error()), "\n")
	return line
}

func timeFromArchiveName(stamp string) (time.Time, error) {
	return time.Parse(store.ArchiveStamp, stamp)
}

// StrayPlan is a file that looks like a plan where no stepseq reads plans.
type StrayPlan struct {
	Path string `json:"path"` // relative to the workspace, slash-separated
	Fix  string `json:"fix"`  // where it should be, in words
}

// StrayPlans names the files that look meant as plans but are not read: a YAML plan
// at the workspace's root or in plan/, one in a subfolder of plans/, and JSON
// files in plans/. A YAML file outside plans/ counts only when it has a top-level
// steps key, so that other tools' YAML is left alone.
func StrayPlans(ws store.Workspace, plansDir string) []StrayPlan {
	var out []StrayPlan
	rel := func(p string) string {
		if r, err := filepath.Rel(ws.Dir, p); err == nil {
			return filepath.ToSlash(r)
		}
		return p
	}
	into := func(name string) string { return rel(filepath.Join(plansDir, name)) }
	isYAML := func(n string) bool { return strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml") }
	for _, dir := range []string{ws.Dir, filepath.Join(ws.Dir, "plan")} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			if e.Type().IsRegular() && isYAML(e.Name()) && looksLikePlan(p) {
				out = append(out, StrayPlan{Path: rel(p), Fix: "plans are read from " + rel(plansDir) + "/: move it to " + into(e.Name())})
			}
		}
	}
	entries, _ := os.ReadDir(plansDir)
	for _, e := range entries {
		p := filepath.Join(plansDir, e.Name())
		switch {
		case e.IsDir() && !strings.HasPrefix(e.Name(), "."):
			sub, _ := os.ReadDir(p)
			for _, s := range sub {
				if s.Type().IsRegular() && isYAML(s.Name()) {
					out = append(out, StrayPlan{Path: rel(filepath.Join(p, s.Name())),
						Fix: "subfolders of " + rel(plansDir) + "/ are not read: move it to " + into(s.Name())})
				}
			}
		case e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".json"):
			name := strings.TrimSuffix(e.Name(), ".json") + ".yaml"
			out = append(out, StrayPlan{Path: rel(p), Fix: "plans are .yaml or .yml files (JSON is YAML too): rename it " + into(name)})
		}
	}
	return out
}

// looksLikePlan reports whether a YAML file has a top-level steps key. It reads
// as plans are read: capped, never blocking on a FIFO.
func looksLikePlan(path string) bool {
	data, err := store.ReadFile(path, store.PlanCap)
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(data)) {
		if strings.HasPrefix(line, "steps:") {
			return true
		}
	}
	return false
}
