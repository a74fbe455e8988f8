package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/planspec"
)

// Runs (DESIGN §14): a run is one plan with its params and its own state file.
// The workspace's own run is state.json, named MainRun; the run NAME is
// state.NAME.json beside it, with its logs, reports, journal and try locks under
// .stepseq/runs/NAME/. Any run's file is the original's format, so the original
// scripts resume it as they resume state.json.

// MainRun is the name of the workspace's own run, state.json. `--run main` and
// an empty name both mean it; no other run may take the name.
const MainRun = "main"

// runsDirName is the folder under .stepseq/ that holds the runs' folders.
const runsDirName = "runs"

// maxRunName bounds a run's name: it is a file name and a folder name.
const maxRunName = 64

// Errors of the run commands, for callers to tell apart with errors.Is (the MCP
// faces map them to their refusal codes). Their text reaches the user as it is.
var (
	ErrRunName   = errors.New("invalid run name")
	ErrRunExists = errors.New("a run of that name exists")
	ErrNoRun     = errors.New("no such run")
	ErrRunClosed = errors.New("the run is closed")
	ErrRunBusy   = errors.New("the workspace is busy")
)

// The words ListRuns says of a run's status.
const (
	RunActive  = "active"
	RunBlocked = "blocked"
	RunDone    = "done"
	RunClosed  = "closed"
	RunInvalid = "invalid" // its state file cannot be read as a state: Error says why
)

// RunStatuses are the words of a run's status, in the order they are told.
var RunStatuses = []string{RunActive, RunBlocked, RunDone, RunClosed, RunInvalid}

// ValidRunName refuses a name that is not a run's: one to 64 ASCII letters,
// digits, '-' and '_', not starting with a dot or a dash. MainRun is valid: it
// names state.json.
func ValidRunName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: the name is empty", ErrRunName)
	case len(name) > maxRunName:
		return fmt.Errorf("%w %q: longer than %d characters", ErrRunName, name, maxRunName)
	case name[0] == '.':
		return fmt.Errorf("%w %q: it starts with a dot", ErrRunName, name)
	case name[0] == '-':
		return fmt.Errorf("%w %q: it starts with a dash, which reads as a flag", ErrRunName, name)
	}
	for i := 0; i < len(name); i++ {
		if !runNameByte(name[i]) {
			return fmt.Errorf("%w %q: %q is not allowed (use ASCII letters, digits, - and _)", ErrRunName, name, rune(name[i]))
		}
	}
	return nil
}

func runNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// RunOfStateFile is the run a state file's base name holds: NAME for
// state.NAME.json with a valid NAME, else "" (the workspace's own run).
func RunOfStateFile(base string) string {
	mid, ok := strings.CutPrefix(base, "state.")
	if !ok {
		return ""
	}
	name, ok := strings.CutSuffix(mid, ".json")
	if !ok || name == MainRun || ValidRunName(name) != nil {
		return ""
	}
	return name
}

// RunStatePath is the state file of run name in the workspace folder dir:
// dir/state.json for MainRun (or ""), dir/state.NAME.json otherwise.
func RunStatePath(dir, name string) string {
	if name == "" || name == MainRun {
		return filepath.Join(dir, "state.json")
	}
	return filepath.Join(dir, "state."+name+".json")
}

// RunName is the run's name: MainRun for the workspace's own run.
func (w Workspace) RunName() string {
	if w.Run == "" {
		return MainRun
	}
	return w.Run
}

// ForRun is the same folder seen from run name (MainRun or "": state.json).
func (w Workspace) ForRun(name string) Workspace {
	if name == MainRun {
		name = ""
	}
	return Workspace{Dir: w.Dir, State: RunStatePath(w.Dir, name), Run: name}
}

// RunDir is the run's own folder: .stepseq/ for the workspace's own run,
// .stepseq/runs/NAME/ for the others.
func (w Workspace) RunDir() string { return w.runMeta() }

// RunsDir holds the folders of the runs other than the workspace's own.
func (w Workspace) RunsDir() string { return w.meta(runsDirName) }

// ClosedPath is where a closed run's state is kept until retention prunes it.
// The workspace's own run, closed, goes to the history instead.
func (w Workspace) ClosedPath() string { return w.runMeta("closed.json") }

// CloseRequestPath is the file that asks a live sidecar to close the run.
func (w Workspace) CloseRequestPath() string { return w.runMeta("close") }

// RunInfo is what ListRuns says of one run.
type RunInfo struct {
	Name   string         `json:"name"`
	State  string         `json:"state"` // the state file, workspace-relative
	Plan   string         `json:"plan"`
	Status string         `json:"status"` // RunActive, RunBlocked, RunDone, RunClosed or RunInvalid
	Params map[string]any `json:"params,omitempty"`
	// Progress: steps DONE (skipped ones included) of steps, and the step at
	// the cursor while the run is not done.
	Done     int      `json:"done"`
	Steps    int      `json:"steps"`
	Current  string   `json:"current,omitempty"`
	Blockers []string `json:"blockers,omitempty"`
	Error    string   `json:"error,omitempty"` // RunInvalid: why the file cannot be read
	// Updated is when the state file was last written (for a closed run: when
	// it was closed), RFC 3339 in UTC.
	Updated string `json:"updated"`
}

// runInfo describes the run whose state file is path, named name, with status
// forced to closed when closed.
func runInfo(ws Workspace, name, path string, closed bool) RunInfo {
	info := RunInfo{Name: name, State: filepath.Base(path)}
	if closed {
		if rel, err := filepath.Rel(ws.Dir, path); err == nil {
			info.State = filepath.ToSlash(rel)
		}
	}
	if fi, err := os.Stat(path); err == nil {
		info.Updated = fi.ModTime().UTC().Format(time.RFC3339)
	}
	st, err := (&StateFile{Path: path}).Read()
	switch {
	case err != nil:
		info.Status, info.Error = RunInvalid, err.Error()
	case closed:
		info.Status = RunClosed
	case st.Status == planspec.StatusDone:
		info.Status = RunDone
	case len(st.Blockers) > 0:
		info.Status = RunBlocked
	default:
		info.Status = RunActive
	}
	if closed && err != nil {
		info.Status = RunClosed
	}
	if st == nil {
		return info
	}
	info.Plan = st.Settings.Name
	info.Params = st.Settings.Params
	info.Steps = len(st.StepQueue)
	info.Blockers = st.Blockers
	for _, id := range st.StepQueue {
		if r := st.StepRuns[id]; r != nil && r.Status == planspec.StatusDone {
			info.Done++
		}
	}
	if st.Status != planspec.StatusDone && st.CurrentStep >= 0 && st.CurrentStep < len(st.StepQueue) {
		info.Current = st.StepQueue[st.CurrentStep]
	}
	return info
}

// RunNames lists the runs whose state file is in the workspace folder: MainRun
// first when state.json exists, then the others by name.
func RunNames(ws Workspace) ([]string, error) {
	entries, err := os.ReadDir(ws.Dir)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	var names []string
	main := false
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		if e.Name() == "state.json" {
			main = true
		} else if name := RunOfStateFile(e.Name()); name != "" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if main {
		names = append([]string{MainRun}, names...)
	}
	return names, nil
}

// ListRuns reports every run of the workspace: those with a state file (MainRun
// first, then by name), then the closed ones retention has not pruned yet.
func ListRuns(ws Workspace) ([]RunInfo, error) {
	names, err := RunNames(ws)
	if err != nil {
		return nil, err
	}
	out := make([]RunInfo, len(names))
	live := map[string]bool{}
	for _, name := range names {
		live[name] = true
	}
	// Each run's file is read and parsed on its own: spread over a few
	// goroutines, a thousand runs list in a fraction of the time one takes.
	inParallel(len(names), func(i int) {
		rw := ws.ForRun(names[i])
		out[i] = runInfo(rw, names[i], rw.State, false)
	})
	entries, _ := os.ReadDir(ws.RunsDir())
	for _, e := range entries {
		if !e.IsDir() || live[e.Name()] || ValidRunName(e.Name()) != nil {
			continue
		}
		rw := ws.ForRun(e.Name())
		if _, err := os.Lstat(rw.ClosedPath()); err == nil {
			out = append(out, runInfo(rw, e.Name(), rw.ClosedPath(), true))
		}
	}
	return out, nil
}

// inParallel calls f(0) … f(n-1) from a few goroutines (twice the CPUs: file
// reads wait on the disk), and returns once every call has returned.
func inParallel(n int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, 2*runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		}()
	}
	wg.Wait()
}

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
func (r *Runtime) StartRun(req RunStart) (RunInfo, error) {
	pf := req.Plan
	if pf.Plan == nil {
		if pf.Err == nil {
			pf.Err = fmt.Errorf("%w: no plan", planspec.ErrInvalidPlan)
		}
		return RunInfo{}, pf.Err
	}
	if req.Name != "" {
		if err := ValidRunName(req.Name); err != nil {
			return RunInfo{}, err
		}
	}
	pf.Params = req.Params
	if pf = r.AdmitPlan(pf, req.From); pf.Plan == nil {
		return RunInfo{}, pf.Err
	}
	ws := Workspace{Dir: r.WS.Dir}
	if req.Name == MainRun {
		main := &Runtime{WS: ws.ForRun(MainRun), Getenv: r.Getenv, Allow: r.Allow, ExposeEnv: r.ExposeEnv, Logger: r.Logger,
			Journal: &Journal{Path: ws.ForRun(MainRun).JournalPath()}, Now: r.Now}
		defer main.Journal.Close()
		if _, _, err := main.ApplyPlan(&StateFile{Path: main.WS.State}, pf, false); err != nil {
			return RunInfo{}, err
		}
		return runInfo(main.WS, MainRun, main.WS.State, false), nil
	}
	name, err := reserveRun(ws, req.Name, pf.Plan.Name)
	if err != nil {
		return RunInfo{}, err
	}
	rw := ws.ForRun(name)
	st := pf.Plan.State(pf.Source, pf.Hash)
	st.Settings.Params, st.Settings.Face = pf.Resolved, pf.Face
	if size := len(st.Marshal()); size > planStateCap {
		_ = os.Remove(rw.RunDir())
		return RunInfo{}, fmt.Errorf("%s: %w: its state would start at %s, over the %s a plan may take: split the plan",
			pf.Source, ErrStateTooBig, mib(size), mib(planStateCap))
	}
	if err := (&StateFile{Path: rw.State}).Write(st); err != nil {
		_ = os.Remove(rw.RunDir())
		return RunInfo{}, err
	}
	j := &Journal{Path: rw.JournalPath()}
	_ = j.Record(core.Entry{Event: "run-start", Reason: "started", Detail: map[string]any{"file": pf.Source, "hash": pf.Hash, "run": name}})
	_ = j.Close()
	return runInfo(rw, name, rw.State, false), nil
}

// reserveRun takes a run's name by making its folder, which only one maker
// gets: two starts at once never share a name. want "" takes the plan's name,
// made valid and unique.
func reserveRun(ws Workspace, want, planName string) (string, error) {
	if err := os.MkdirAll(ws.RunsDir(), 0o755); err != nil {
		return "", fmt.Errorf("start run: %w", err)
	}
	taken := func(name string) (bool, error) {
		if _, err := os.Lstat(RunStatePath(ws.Dir, name)); err == nil {
			return true, nil // a state file written by hand, its folder not made yet
		}
		err := os.Mkdir(ws.ForRun(name).RunDir(), 0o755)
		if errors.Is(err, fs.ErrExist) {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("start run %s: %w", name, err)
		}
		if _, err := os.Lstat(RunStatePath(ws.Dir, name)); err == nil {
			_ = os.Remove(ws.ForRun(name).RunDir())
			return true, nil
		}
		return false, nil
	}
	if want != "" {
		t, err := taken(want)
		switch {
		case err != nil:
			return "", err
		case t:
			return "", fmt.Errorf("%w: %s (%sits state is %s; `stepseq runs` lists them): pick another name, or close it first",
				ErrRunExists, want, runOwner(ws, want), filepath.Base(RunStatePath(ws.Dir, want)))
		}
		return want, nil
	}
	base := RunNameOf(planName)
	for n := 1; ; n++ {
		name := base
		if n > 1 || base == MainRun {
			suffix := "-" + strconv.Itoa(max(n, 2))
			name = base[:min(len(base), maxRunName-len(suffix))] + suffix
		}
		t, err := taken(name)
		if err != nil {
			return "", err
		}
		if !t {
			return name, nil
		}
	}
}

// runOwner names what holds run name, for a refusal: its plan and whether it
// was started through a face ("plan review, started through MCP; "); "" when
// its state cannot be read.
func runOwner(ws Workspace, name string) string {
	st, err := (&StateFile{Path: RunStatePath(ws.Dir, name)}).Read()
	if err != nil || st.Settings.Name == "" {
		return ""
	}
	if st.Settings.Face != "" {
		return fmt.Sprintf("plan %s, started through %s; ", st.Settings.Name, strings.ToUpper(st.Settings.Face))
	}
	return fmt.Sprintf("plan %s; ", st.Settings.Name)
}

// RunNameOf makes a plan's name a run's name: each byte a run's name may not
// hold becomes '-', a leading dot or dash is dropped, and the name is cut to 64
// bytes; an empty result is "run".
func RunNameOf(planName string) string {
	b := []byte(planName)
	for i, c := range b {
		if !runNameByte(c) {
			b[i] = '-'
		}
	}
	name := strings.TrimLeft(string(b), "-")
	name = name[:min(len(name), maxRunName)]
	if name == "" {
		return "run"
	}
	return name
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
func CloseRun(ws Workspace, name string, grace time.Duration) (RunInfo, error) {
	if err := ValidRunName(name); err != nil {
		return RunInfo{}, err
	}
	rw := ws.ForRun(name)
	if _, err := os.Lstat(rw.State); err != nil {
		if _, cerr := os.Lstat(rw.ClosedPath()); cerr == nil && name != MainRun {
			return RunInfo{}, fmt.Errorf("%w: %s", ErrRunClosed, name)
		}
		return RunInfo{}, fmt.Errorf("%w: %s (no %s; `stepseq runs` lists them)", ErrNoRun, name, filepath.Base(rw.State))
	}
	lock, holder, err := TryLock(rw, "close")
	switch {
	case errors.Is(err, ErrLocked) && holder != nil && holder.Kind != "watch":
		return RunInfo{}, fmt.Errorf("%w: %s %d holds %s; close the run once it ends", ErrRunBusy, holder.Kind, holder.PID, rw.LockPath())
	case errors.Is(err, ErrLocked):
		return askSidecarToClose(rw)
	case err != nil:
		return RunInfo{}, err
	}
	defer lock.Unlock()
	stopRunAgents(rw, grace)
	return archiveRun(rw)
}

// askSidecarToClose leaves the close request for the live sidecar, and waits
// until the run's state file is archived.
func askSidecarToClose(rw Workspace) (RunInfo, error) {
	if err := os.MkdirAll(rw.RunDir(), 0o755); err != nil {
		return RunInfo{}, fmt.Errorf("close %s: %w", rw.RunName(), err)
	}
	if err := os.WriteFile(rw.CloseRequestPath(), []byte(time.Now().UTC().Format(time.RFC3339Nano)+"\n"), 0o644); err != nil {
		return RunInfo{}, fmt.Errorf("close %s: %w", rw.RunName(), err)
	}
	deadline := time.Now().Add(CloseWait)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		if _, err := os.Lstat(rw.State); errors.Is(err, fs.ErrNotExist) {
			if _, err := os.Lstat(rw.CloseRequestPath()); errors.Is(err, fs.ErrNotExist) {
				return closedInfo(rw), nil
			}
		}
		if time.Now().After(deadline) {
			return RunInfo{}, fmt.Errorf("close %s: the sidecar did not close it within %s; its request stays in %s", rw.RunName(), CloseWait, rw.CloseRequestPath())
		}
		time.Sleep(pause)
	}
}

// closedInfo describes a run just closed.
func closedInfo(rw Workspace) RunInfo {
	if rw.Run == "" {
		return RunInfo{Name: MainRun, State: "state.json", Status: RunClosed, Updated: time.Now().UTC().Format(time.RFC3339)}
	}
	return runInfo(rw, rw.Run, rw.ClosedPath(), true)
}

// stopRunAgents stops every live agent that the run's try locks record, as a
// sidecar's shutdown does: SIGTERM to the group, SIGKILL after grace. Without a
// live sidecar such an agent is one a stepseq that died left behind.
func stopRunAgents(rw Workspace, grace time.Duration) {
	dir := filepath.Dir(rw.TryLockPath(0))
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".lock") {
			continue
		}
		rec, ok := readTryRecord(filepath.Join(dir, e.Name()))
		if ok && !rec.Exited && rec.PID > 0 && Alive(rec.PID, rec.StartTicks) {
			stopGroup(rec.PID, rec.StartTicks, grace)
		}
	}
}

// archiveRun moves a closed run's state out of the workspace folder, so that no
// driver and no heartbeat takes it up again, and drops the close request.
func (rw Workspace) archive() error {
	if rw.Run == "" {
		data, err := ReadFile(rw.State, StateCap)
		if err != nil {
			return fmt.Errorf("close %s: %w", MainRun, err)
		}
		name := ""
		if st, err := planspec.ParseState(bytes.NewReader(data), rw.State); err == nil {
			name = st.Settings.Name
		}
		if _, err := rw.Archive(data, name); err != nil {
			return err
		}
		if err := os.Remove(rw.State); err != nil {
			return fmt.Errorf("close %s: %w", MainRun, err)
		}
	} else {
		if err := os.MkdirAll(rw.RunDir(), 0o755); err != nil {
			return fmt.Errorf("close %s: %w", rw.Run, err)
		}
		if err := os.Rename(rw.State, rw.ClosedPath()); err != nil {
			return fmt.Errorf("close %s: %w", rw.Run, err)
		}
		now := time.Now()
		_ = os.Chtimes(rw.ClosedPath(), now, now) // retention counts from the close
	}
	if err := syncDir(rw.Dir); err != nil {
		return err
	}
	j := &Journal{Path: rw.JournalPath()}
	_ = j.Record(core.Entry{Event: "run-close", Reason: "closed", Detail: map[string]any{"run": rw.RunName()}})
	_ = j.Close()
	_ = os.Remove(rw.CloseRequestPath())
	return nil
}

// archiveRun archives the run and describes it closed.
func archiveRun(rw Workspace) (RunInfo, error) {
	if err := rw.archive(); err != nil {
		return RunInfo{}, err
	}
	return closedInfo(rw), nil
}

// readTryRecord reads a try lock's record, whoever holds it.
func readTryRecord(path string) (tryRecord, bool) {
	var rec tryRecord
	data, err := ReadFile(path, recordCap)
	if err != nil || json.Unmarshal(bytes.TrimSpace(data), &rec) != nil {
		return tryRecord{}, false
	}
	return rec, true
}

// stopGroup ends the process group of the agent pid (started at ticks):
// SIGTERM, then SIGKILL once grace has passed with the agent still there.
func stopGroup(pid int, ticks uint64, grace time.Duration) {
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	_ = WaitGone(ctx, pid)
	if Alive(pid, ticks) || groupAlive(pid) {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}
