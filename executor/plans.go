package executor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/renameio/v2"
	"github.com/hashicorp/go-multierror"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/planspec"
)

// ErrPlanActive is returned by ApplyPlan when state.json holds a plan that is still
// IN_PROGRESS and force was not given. Its text reaches the user as it is.
var ErrPlanActive = errors.New("a plan is still in progress")

// ReadPlanFile reads and parses a plan file named outright (on the command line),
// refusing anything but a regular file, and one over PlanCap, before reading it.
func ReadPlanFile(path, source string) core.PlanFile {
	data, err := ReadFile(path, PlanCap)
	return parsePlanFile(path, source, data, err)
}

// ReadPlanFileIn reads and parses the plan file rel (slash-separated) of the
// workspace opened as root. A symbolic link out of the workspace is refused and
// its target never read nor named; so is anything but a regular file, and a file
// over PlanCap.
func ReadPlanFileIn(root *os.Root, rel string) core.PlanFile {
	path := filepath.FromSlash(rel)
	if root != nil {
		path = filepath.Join(root.Name(), path)
	}
	data, err := ReadFileIn(root, rel, PlanCap)
	return parsePlanFile(path, rel, data, err)
}

func parsePlanFile(path, source string, data []byte, err error) core.PlanFile {
	pf := core.PlanFile{Path: path, Source: source, Name: planspec.PlanName(path)}
	if err != nil {
		pf.Err = err
		return pf
	}
	pf.Hash = planspec.Hash(data)
	pf.Plan, pf.Err = planspec.ParsePlan(bytes.NewReader(data), source)
	if pf.Plan != nil && pf.Plan.Name == "" {
		pf.Plan.Name = pf.Name
	}
	return pf
}

// ErrorLines lists a plan's errors one per line, as file:line:col: message.
func ErrorLines(err error) []string {
	if err == nil {
		return nil
	}
	var me *multierror.Error
	if errors.As(err, &me) {
		out := make([]string, 0, len(me.Errors))
		for _, e := range me.Errors {
			out = append(out, e.Error())
		}
		return out
	}
	return strings.Split(strings.TrimSpace(err.Error()), "\n")
}

func (w Workspace) planRecordPath(name string) string {
	return filepath.Join(w.PlansDir(), name+".json")
}

// ReadPlanRecord reads a plan's record; ok is false when there is none.
func (w Workspace) ReadPlanRecord(name string) (core.PlanRecord, bool) {
	var rec core.PlanRecord
	data, err := ReadFile(w.planRecordPath(name), recordCap)
	if err != nil || json.Unmarshal(data, &rec) != nil {
		return core.PlanRecord{}, false
	}
	return rec, true
}

// WritePlanRecord replaces a plan's record atomically.
func (w Workspace) WritePlanRecord(name string, rec core.PlanRecord) error {
	if err := os.MkdirAll(w.PlansDir(), 0o755); err != nil {
		return fmt.Errorf("plan record: %w", err)
	}
	data, _ := json.MarshalIndent(rec, "", "  ")
	data = append(data, '\n')
	path := w.planRecordPath(name)
	if err := renameio.WriteFile(path, data, 0o644, renameio.WithTempDir(w.PlansDir())); err != nil {
		return fmt.Errorf("plan record %s: %w", path, err)
	}
	return nil
}

// Archive keeps a state that a new plan replaces under .stepseq/history/, durably.
func (w Workspace) Archive(data []byte, name string) (string, error) {
	dir := w.HistoryDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("archive: %w", err)
	}
	if name == "" {
		name = "state"
	}
	path := filepath.Join(dir, time.Now().UTC().Format(archiveStamp)+"-"+name+".json")
	if err := renameio.WriteFile(path, data, 0o644, renameio.WithTempDir(dir)); err != nil {
		return "", fmt.Errorf("archive %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return "", err
	}
	return path, nil
}

// ApplyPlan turns a plan into the workspace's state.json. A state whose plan is
// still IN_PROGRESS is kept unless force; a state being replaced is archived first,
// so nothing is lost. It returns the new state and where the old one went.
func (r *Runtime) ApplyPlan(sf *StateFile, pf core.PlanFile, force bool) (*planspec.State, string, error) {
	st, archived, err := r.PreparePlan(sf, pf, force)
	if err != nil {
		return nil, archived, err
	}
	if err := sf.Write(st); err != nil {
		return nil, archived, err
	}
	r.recordApplied(pf, archived)
	return st, archived, nil
}

func (r *Runtime) recordApplied(pf core.PlanFile, archived string) {
	detail := map[string]any{"file": pf.Source, "hash": pf.Hash}
	if archived != "" {
		detail["archived"] = archived
	}
	r.record(core.Entry{Event: "plan", Reason: "applied", Detail: detail})
}

// PreparePlan is ApplyPlan up to the write: the plan admitted, its state made
// and measured, the state it replaces archived. The sidecar hands the state to
// its machine, which writes it (core.PlanApplied).
func (r *Runtime) PreparePlan(sf *StateFile, pf core.PlanFile, force bool) (*planspec.State, string, error) {
	if pf = r.AdmitPlan(pf, FromWorkspace); pf.Plan == nil {
		return nil, "", pf.Err
	}
	st := pf.Plan.State(pf.Source, pf.Hash)
	st.Settings.Params, st.Settings.Face = pf.Resolved, pf.Face
	if size := len(st.Marshal()); size > planStateCap {
		return nil, "", fmt.Errorf("%s: %w: its state.json would start at %s, over the %s a plan may take (a quarter of the %s state cap, the rest kept for its runs): split the plan",
			pf.Source, ErrStateTooBig, mib(size), mib(planStateCap), mib(stateWriteCap))
	}
	archived := ""
	data, err := ReadFile(sf.Path, StateCap)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, "", fmt.Errorf("read %s: %w", sf.Path, err)
	default:
		cur, perr := planspec.ParseState(bytes.NewReader(data), sf.Path)
		if !force {
			if perr != nil {
				return nil, "", fmt.Errorf("%w\n%s is not a valid state: fix it, or give --force to archive it and apply the plan", perr, sf.Path)
			}
			if cur.Status != planspec.StatusDone {
				name := cur.Settings.Name
				if name == "" {
					name = "a hand-written plan"
				}
				return nil, "", fmt.Errorf("%w: %s holds %s at step %d of %d; wait for it to finish, or give --force to archive it and apply this one",
					ErrPlanActive, sf.Path, name, cur.CurrentStep+1, len(cur.StepQueue))
			}
		}
		name := ""
		if perr == nil {
			name = cur.Settings.Name
		}
		if archived, err = r.WS.Archive(data, name); err != nil {
			return nil, "", err
		}
	}
	return st, archived, nil
}
