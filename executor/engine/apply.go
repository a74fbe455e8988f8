package engine

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/renameio/v2"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
	planpkg "github.com/stepseq/stepseq/planspec/plan"
)

// `stepseq apply` never writes a state file unlocked: without a sidecar it takes
// the workspace lock for its write, and beside a live sidecar it hands the plan
// over the way any agent does, as a file in plans/ whose verdict it waits for.

// Applied is what Apply did.
type Applied struct {
	State    *planspec.State // the state written; nil when the plan was handed over
	Archived string          // where the state it replaced went
	// HandedTo is the live sidecar the plan was handed to, with its verdict.
	HandedTo *store.Holder
	File     string // the plan file in plans/ it took in, workspace-relative
	Record   core.PlanRecord
}

// ErrApplyBusy is Apply's refusal while a one-shot stepseq (check, step) holds
// the workspace: its chain owns the state until it ends.
var ErrApplyBusy = errors.New("executor: the workspace is busy")

// ErrApplyParams refuses params for a plan handed to a live sidecar: a plan
// file in plans/ runs with its params' defaults.
var ErrApplyParams = errors.New("executor: params cannot be handed to a live sidecar")

// HandOverWait bounds how long Apply waits for a live sidecar's verdict.
var HandOverWait = 30 * time.Second

// Apply turns pf into the state file sf under the workspace lock (ApplyPlan). A
// live sidecar holding the lock is handed the plan instead: written to its
// plans folder as NAME.yaml (unless it is there already) and judged by it; the
// verdict is in the result. It refuses to replace another plan file of that name.
func (r *Runtime) Apply(sf *store.StateFile, pf core.PlanFile, force bool) (Applied, error) {
	lock, holder, err := store.TryLock(r.WS, "apply")
	switch {
	case errors.Is(err, store.ErrLocked) && holder != nil && holder.Kind == "watch":
		return r.handOver(pf, holder)
	case errors.Is(err, store.ErrLocked):
		who := "another stepseq"
		if holder != nil {
			who = fmt.Sprintf("stepseq %s %d", holder.Kind, holder.PID)
		}
		return Applied{}, fmt.Errorf("%w: %s holds %s; apply the plan once it ends", ErrApplyBusy, who, r.WS.LockPath())
	case err != nil:
		return Applied{}, err
	}
	defer lock.Unlock()
	st, archived, err := r.ApplyPlan(sf, pf, force)
	return Applied{State: st, Archived: archived}, err
}

// handOver gives pf to the live sidecar through its plans folder and waits for
// the verdict the sidecar records for that content.
func (r *Runtime) handOver(pf core.PlanFile, holder *store.Holder) (Applied, error) {
	if len(pf.Params) > 0 {
		return Applied{}, fmt.Errorf("%w: stepseq %s %d runs %s; start a run with them instead: stepseq start %s --param …",
			ErrApplyParams, holder.Kind, holder.PID, r.WS.Dir, pf.Source)
	}
	if !pf.Budget.IsZero() {
		return Applied{}, fmt.Errorf("%w: stepseq %s %d runs %s, and a budget cannot be handed to it with the plan: start a run with it instead: stepseq start %s --budget %s, or set budget: in the plan",
			ErrApplyParams, holder.Kind, holder.PID, r.WS.Dir, pf.Source, pf.Budget)
	}
	data, err := store.ReadFile(pf.Path, store.PlanCap)
	if err != nil {
		return Applied{}, err
	}
	dir := filepath.Join(r.WS.Dir, "plans")
	target := filepath.Join(dir, pf.Name+".yaml")
	rel := "plans/" + pf.Name + ".yaml"
	same, err := samePath(pf.Path, target)
	if err != nil {
		return Applied{}, err
	}
	if !same {
		switch old, err := store.ReadFile(target, store.PlanCap); {
		case err == nil && !bytes.Equal(old, data):
			return Applied{}, fmt.Errorf("%s holds another plan of that name: the live sidecar (stepseq %s %d) takes plans from there; rename %s, or remove %s",
				rel, holder.Kind, holder.PID, pf.Source, rel)
		case err == nil:
		case errors.Is(err, os.ErrNotExist):
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return Applied{}, fmt.Errorf("plans folder: %w", err)
			}
			if err := renameio.WriteFile(target, data, 0o644, renameio.WithTempDir(dir)); err != nil {
				return Applied{}, fmt.Errorf("hand %s to the sidecar: %w", pf.Source, err)
			}
		default:
			return Applied{}, err
		}
	}
	hash := planpkg.Hash(data)
	deadline := time.Now().Add(HandOverWait)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		if rec, ok := r.WS.ReadPlanRecord(pf.Name); ok && rec.Hash == hash && r.judged(rec, rel) {
			return Applied{HandedTo: holder, File: rel, Record: rec}, nil
		}
		if time.Now().After(deadline) {
			return Applied{}, fmt.Errorf("%s handed to stepseq %s %d, but no verdict within %s; it stays there for the sidecar", rel, holder.Kind, holder.PID, HandOverWait)
		}
		time.Sleep(pause)
	}
}

// judged reports whether rec is the sidecar's verdict on the plan at rel:
// waiting is one only while another plan runs; otherwise the plan is about to
// be applied.
func (r *Runtime) judged(rec core.PlanRecord, rel string) bool {
	if rec.Status != core.PlanWaiting {
		return true
	}
	st, err := (&store.StateFile{Path: r.WS.State}).Read()
	return err == nil && st.Settings.Source != rel && st.Status != planspec.StatusDone
}

// samePath reports whether a and b name the same file (b may not exist).
func samePath(a, b string) (bool, error) {
	fa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	fb, err := os.Stat(b)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(fa, fb), nil
}
