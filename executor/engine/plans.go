package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/go-multierror"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
	planpkg "github.com/stepseq/stepseq/planspec/plan"
)

// ErrPlanActive is returned by ApplyPlan when state.json holds a plan that is still
// IN_PROGRESS and force was not given. Its text reaches the user as it is.
var ErrPlanActive = errors.New("a plan is still in progress")

// ReadPlanFile reads and parses a plan file named outright (on the command line),
// refusing anything but a regular file, and one over PlanCap, before reading it.
func ReadPlanFile(path, source string) core.PlanFile {
	data, err := store.ReadFile(path, store.PlanCap)
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
	data, err := store.ReadFileIn(root, rel, store.PlanCap)
	return parsePlanFile(path, rel, data, err)
}

func parsePlanFile(path, source string, data []byte, err error) core.PlanFile {
	pf := core.PlanFile{Path: path, Source: source, Name: planpkg.PlanName(path)}
	if err != nil {
		pf.Err = err
		return pf
	}
	pf.Hash = planpkg.Hash(data)
	pf.Plan, pf.Err = planpkg.ParsePlan(bytes.NewReader(data), source)
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

// ApplyPlan turns a plan into the workspace's state.json. A state whose plan is
// still IN_PROGRESS is kept unless force; a state being replaced is archived first,
// so nothing is lost. It returns the new state and where the old one went.
func (r *Runtime) ApplyPlan(sf *store.StateFile, pf core.PlanFile, force bool) (*planspec.State, string, error) {
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
func (r *Runtime) PreparePlan(sf *store.StateFile, pf core.PlanFile, force bool) (*planspec.State, string, error) {
	if pf = r.AdmitPlan(pf, FromWorkspace); pf.Plan == nil {
		return nil, "", pf.Err
	}
	st := pf.Plan.State(pf.Source, pf.Hash)
	st.Settings.Params, st.Settings.Face = pf.Resolved, pf.Face
	st.Settings.RunID = store.NewRunID(r.WS.RunName())
	planpkg.RenderAtStart(st)
	st.Settings.Budget = pf.RunBudget()
	r.warnBlind(pf)
	if size := len(st.Marshal()); size > store.PlanStateCap {
		return nil, "", fmt.Errorf("%s: %w: its state.json would start at %s, over the %s a plan may take (a quarter of the %s state cap, the rest kept for its runs): split the plan",
			pf.Source, store.ErrStateTooBig, store.MiB(size), store.MiB(store.PlanStateCap), store.MiB(store.StateWriteCap))
	}
	archived := ""
	data, err := store.ReadFile(sf.Path, store.StateCap)
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
