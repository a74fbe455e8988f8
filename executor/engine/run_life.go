package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
	planpkg "github.com/stepseq/stepseq/planspec/plan"
)

// RunStart asks StartRun for a run.
type RunStart struct {
	// Plan is the plan, read (ReadPlanFile, ReadPlanFileIn) or parsed; an
	// invalid one (Plan.Plan nil) is refused with its errors.
	Plan core.PlanFile
	// Params are the params given; the plan's defaults fill in the rest.
	Params map[string]any
	// Name is the run's name; "": the plan's name, made unique (name-2,
	// name-3…). A name given and taken is refused with ErrRunExists. MainRun
	// starts the plan into state.json, as apply does.
	Name string
	// From says who gives the plan, for --allow-agent.
	From AgentSource
	// Budget bounds the run in place of the plan's budget, bound by bound.
	Budget planspec.Budget
}

// StartRun starts a run of a plan beside the workspace's others: it checks the
// plan's agents and the params (as apply does), picks the name, and writes the
// run's state file through the same durable write as every state. The live
// sidecar sees the file appear and drives it; without one, `stepseq check
// state.NAME.json` or the original's check script does. r is a runtime of the
// workspace (any run's).
//
// Refusals: the plan's errors (planspec.ErrInvalidPlan and the file's
// location), *planspec.ParamsError, ErrRunName, ErrRunExists, and ErrPlanActive
// for MainRun while state.json's plan is still in progress.
func (r *Runtime) StartRun(req RunStart) (store.RunInfo, error) {
	pf := req.Plan
	if pf.Plan == nil {
		if pf.Err == nil {
			pf.Err = fmt.Errorf("%w: no plan", planpkg.ErrInvalidPlan)
		}
		return store.RunInfo{}, pf.Err
	}
	if req.Name != "" {
		if err := store.ValidRunName(req.Name); err != nil {
			return store.RunInfo{}, err
		}
	}
	pf.Params = req.Params
	pf.Budget = req.Budget
	if pf = r.AdmitPlan(pf, req.From); pf.Plan == nil {
		return store.RunInfo{}, pf.Err
	}
	ws := store.Workspace{Dir: r.WS.Dir}
	if req.Name == store.MainRun {
		main := &Runtime{WS: ws.ForRun(store.MainRun), Getenv: r.Getenv, Allow: r.Allow, ExposeEnv: r.ExposeEnv, Logger: r.Logger,
			Journal: &store.Journal{Path: ws.ForRun(store.MainRun).JournalPath()}, Now: r.Now}
		defer main.Journal.Close()
		if _, _, err := main.ApplyPlan(&store.StateFile{Path: main.WS.State}, pf, false); err != nil {
			return store.RunInfo{}, err
		}
		return store.ReadRunInfo(main.WS, store.MainRun, main.WS.State, false), nil
	}
	name, err := store.ReserveRun(ws, req.Name, pf.Plan.Name)
	if err != nil {
		return store.RunInfo{}, err
	}
	rw := ws.ForRun(name)
	st := pf.Plan.State(pf.Source, pf.Hash)
	st.Settings.Params, st.Settings.Face = pf.Resolved, pf.Face
	st.Settings.RunID = store.NewRunID(name)
	planpkg.RenderAtStart(st)
	st.Settings.Budget = pf.RunBudget()
	r.warnBlind(pf)
	if size := len(st.Marshal()); size > store.PlanStateCap {
		_ = os.Remove(rw.RunDir())
		return store.RunInfo{}, fmt.Errorf("%s: %w: its state would start at %s, over the %s a plan may take: split the plan",
			pf.Source, store.ErrStateTooBig, store.MiB(size), store.MiB(store.PlanStateCap))
	}
	if err := (&store.StateFile{Path: rw.State}).Write(st); err != nil {
		_ = os.Remove(rw.RunDir())
		return store.RunInfo{}, err
	}
	j := &store.Journal{Path: rw.JournalPath()}
	_ = j.Record(core.Entry{Event: "run-start", Reason: "started", Detail: map[string]any{"file": pf.Source, "hash": pf.Hash, "run": name}})
	_ = j.Close()
	return store.ReadRunInfo(rw, name, rw.State, false), nil
}

// CloseWait bounds how long CloseRun waits for a live sidecar to close a run.
var CloseWait = 30 * time.Second

// CloseRun closes a run: its agent is stopped as SIGTERM stops the sidecar's
// (SIGTERM to its process group, SIGKILL after grace), and its state is
// archived: under .stepseq/runs/NAME/closed.json, listed as closed until
// retention prunes it; the workspace's own run goes to the history, as a plan
// that a new one replaces. With a live sidecar on the workspace the sidecar
// does it (CloseRun asks, and waits at most CloseWait); without one, CloseRun
// takes the workspace lock and does it itself.
//
// Refusals: ErrRunName, ErrNoRun, ErrRunClosed, and ErrRunBusy while a
// one-shot stepseq (check, step) holds the workspace.
func closeRunFiles(ws store.Workspace, name string, grace time.Duration) (store.RunInfo, error) {
	if err := store.ValidRunName(name); err != nil {
		return store.RunInfo{}, err
	}
	rw := ws.ForRun(name)
	if _, err := os.Lstat(rw.State); err != nil {
		if _, cerr := os.Lstat(rw.ClosedPath()); cerr == nil && name != store.MainRun {
			// Closing twice is an answer: the run is closed, as asked.
			return store.ClosedInfo(rw), nil
		}
		return store.RunInfo{}, fmt.Errorf("%w: %s (no %s; `stepseq runs` lists them)", store.ErrNoRun, name, filepath.Base(rw.State))
	}
	lock, holder, err := store.TryLock(rw, "close")
	switch {
	case errors.Is(err, store.ErrLocked) && holder != nil && holder.Kind != "watch":
		return store.RunInfo{}, fmt.Errorf("%w: %s %d holds %s; close the run once it ends", store.ErrRunBusy, holder.Kind, holder.PID, rw.LockPath())
	case errors.Is(err, store.ErrLocked):
		return askSidecarToClose(rw)
	case err != nil:
		return store.RunInfo{}, err
	}
	defer lock.Unlock()
	stopRunAgents(rw, grace)
	return archiveRun(rw)
}

// askSidecarToClose leaves the close request for the live sidecar, and waits
// until the run's state file is archived.
func askSidecarToClose(rw store.Workspace) (store.RunInfo, error) {
	if err := os.MkdirAll(rw.RunDir(), 0o755); err != nil {
		return store.RunInfo{}, fmt.Errorf("close %s: %w", rw.RunName(), err)
	}
	if err := os.WriteFile(rw.CloseRequestPath(), []byte(time.Now().UTC().Format(time.RFC3339Nano)+"\n"), 0o644); err != nil {
		return store.RunInfo{}, fmt.Errorf("close %s: %w", rw.RunName(), err)
	}
	deadline := time.Now().Add(CloseWait)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		if _, err := os.Lstat(rw.State); errors.Is(err, fs.ErrNotExist) {
			if _, err := os.Lstat(rw.CloseRequestPath()); errors.Is(err, fs.ErrNotExist) {
				return store.ClosedInfo(rw), nil
			}
		}
		if time.Now().After(deadline) {
			return store.RunInfo{}, fmt.Errorf("close %s: the sidecar did not close it within %s; its request stays in %s", rw.RunName(), CloseWait, rw.CloseRequestPath())
		}
		time.Sleep(pause)
	}
}

// stopRunAgents stops every live agent that the run's try locks record, as a
// sidecar's shutdown does: SIGTERM to the group, SIGKILL after grace, and what
// the try started that still lives though the agent is gone. Without a live
// sidecar such an agent is one a stepseq that died left behind.
func stopRunAgents(rw store.Workspace, grace time.Duration) {
	dir := filepath.Dir(rw.TryLockPath(0))
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".lock") {
			continue
		}
		rec, ok := readTryRecord(filepath.Join(dir, e.Name()))
		if ok && !rec.Exited && rec.PID > 0 && proc.Alive(rec.PID, rec.StartTicks) {
			stopGroup(rec.PID, rec.StartTicks, grace)
		}
		if ok {
			proc.StopTry(rw, rec, grace)
		}
	}
}

// archiveRun archives the run and describes it closed.
func archiveRun(rw store.Workspace) (store.RunInfo, error) {
	if err := rw.ArchiveClosed(); err != nil {
		return store.RunInfo{}, err
	}
	return store.ClosedInfo(rw), nil
}

// readTryRecord reads a try lock's record, whoever holds it.
func readTryRecord(path string) (proc.TryRecord, bool) {
	var rec proc.TryRecord
	data, err := store.ReadFile(path, store.RecordCap)
	if err != nil || json.Unmarshal(bytes.TrimSpace(data), &rec) != nil {
		return proc.TryRecord{}, false
	}
	return rec, true
}

// stopGroup ends the process group of the agent pid (started at ticks):
// SIGTERM, then SIGKILL once grace has passed with the agent still there.
func stopGroup(pid int, ticks uint64, grace time.Duration) {
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	_ = proc.WaitGone(ctx, pid)
	if proc.Alive(pid, ticks) || proc.GroupAlive(pid) {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// AdoptRun makes the state file at path, a copy of another run (its id names
// that run), a run of its own: its id becomes its own, so the sidecar drives
// it. Only a workspace's state.NAME.json can be one.
func AdoptRun(path string) (store.RunInfo, error) {
	dir, base := filepath.Dir(path), filepath.Base(path)
	name := store.RunOfStateFile(base)
	if name == "" {
		return store.RunInfo{}, fmt.Errorf("%w: %s: a run of its own needs a state.NAME.json file; copy it to one first", store.ErrRunName, path)
	}
	sf := &store.StateFile{Path: path}
	st, err := sf.Read()
	if err != nil {
		return store.RunInfo{}, err
	}
	st.Settings.RunID = store.NewRunID(name)
	if err := sf.Write(st); err != nil {
		return store.RunInfo{}, err
	}
	rw := store.Workspace{Dir: dir}.ForRun(name)
	j := &store.Journal{Path: rw.JournalPath()}
	_ = j.Record(core.Entry{Event: "run-start", Reason: "adopted", Detail: map[string]any{"file": base, "run": name}})
	_ = j.Close()
	return store.ReadRunInfo(rw, name, rw.State, false), nil
}
