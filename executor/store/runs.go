package store

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
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
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/planspec"
)

// Runs: a run is one plan with its params and its own state file.
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

// ClosedRun is the one refusal of a run that was closed.
func ClosedRun(name string) error { return fmt.Errorf("%w: %s", ErrRunClosed, name) }

// The words ListRuns says of a run's status: a run with a state file is
// where core.RunWord says it stands, the word every face says.
const (
	RunActive  = core.RunActive
	RunBlocked = core.RunBlocked
	RunDone    = core.RunDone
	RunClosed  = "closed"
	RunInvalid = "invalid" // its state file cannot be read as a state: Error says why
	// RunCopy is a state file that carries another run's id (a backup copy,
	// cp state.json state.orig.json): listed, never driven.
	RunCopy = "copy"
)

// RunStatuses are the words of a run's status, in the order they are told.
var RunStatuses = []string{RunActive, RunBlocked, RunDone, RunClosed, RunInvalid, RunCopy}

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
func (w Workspace) RunDir() string { return w.RunMeta() }

// RunsDir holds the folders of the runs other than the workspace's own.
func (w Workspace) RunsDir() string { return w.meta(runsDirName) }

// ClosedPath is where a closed run's state is kept until retention prunes it.
// The workspace's own run, closed, goes to the history instead.
func (w Workspace) ClosedPath() string { return w.RunMeta("closed.json") }

// CloseRequestPath is the file that asks a live sidecar to close the run.
func (w Workspace) CloseRequestPath() string { return w.RunMeta("close") }

// RunInfo is what ListRuns says of one run.
type RunInfo struct {
	Name   string         `json:"name"`
	State  string         `json:"state"` // the state file, workspace-relative
	Plan   string         `json:"plan"`
	Status string         `json:"status"` // RunActive, RunBlocked, RunDone, RunClosed or RunInvalid
	Params map[string]any `json:"params,omitempty"`
	// Progress: steps DONE (skipped ones included) of steps, and the step at
	// the cursor while the run is not done.
	Done    int    `json:"done"`
	Steps   int    `json:"steps"`
	Current string `json:"current,omitempty"`
	// InFlight are the steps in progress of a run whose steps run side by
	// side, in queue order.
	InFlight []string `json:"inFlight,omitempty"`
	Blockers []string `json:"blockers,omitempty"`
	Error    string   `json:"error,omitempty"` // RunInvalid: why the file cannot be read
	// Awaiting is the gate the run waits on for a person's yes: "plan", or
	// the step whose gate it is; absent when none waits.
	Awaiting string `json:"awaiting,omitempty"`
	// CopyOf, for RunCopy, is the run whose copy the file is; Hint says how to
	// start it as a run of its own, if that was meant.
	CopyOf string `json:"copyOf,omitempty"`
	Hint   string `json:"hint,omitempty"`
	// Updated is when the state file was last written (for a closed run: when
	// it was closed), RFC 3339 in UTC.
	Updated string `json:"updated"`
	// Spend is what the run's agents spent so far, Cost the same in words
	// ("$1.20, 45,000 tokens …, 4 tries"), Budget what the run may spend;
	// absent before its first try, and for a run without a budget.
	Spend  *planspec.Spend  `json:"spend,omitempty"`
	Cost   string           `json:"cost,omitempty"`
	Budget *planspec.Budget `json:"budget,omitempty"`
}

// ReadRunInfo describes the run whose state file is path, named name, with status
// forced to closed when closed.
func ReadRunInfo(ws Workspace, name, path string, closed bool) RunInfo {
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
	case st.CopyOf(name) != "":
		info.Status, info.CopyOf = RunCopy, st.CopyOf(name)
		info.Hint = fmt.Sprintf("a copy of run %s: it launches nothing; to run it as a run of its own: stepseq start --from %s", info.CopyOf, info.State)
	default:
		info.Status = core.RunWord(st)
	}
	if closed && err != nil {
		info.Status = RunClosed
	}
	if st == nil {
		return info
	}
	info.Plan = st.Settings.Name
	info.Params = st.Settings.Params
	if s := st.Settings.Spend; !s.IsZero() {
		info.Spend, info.Cost = &s, s.Text()
	}
	if b := st.Settings.Budget; !b.IsZero() {
		info.Budget = &b
	}
	info.Steps = len(st.StepQueue)
	info.Blockers = st.Blockers
	info.Done, info.InFlight = progress(st)
	if st.Status != planspec.StatusDone && st.CurrentStep >= 0 && st.CurrentStep < len(st.StepQueue) {
		info.Current = st.StepQueue[st.CurrentStep]
		info.Awaiting = awaiting(st, info.Current)
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
		out[i] = ReadRunInfo(rw, names[i], rw.State, false)
	})
	entries, _ := os.ReadDir(ws.RunsDir())
	for _, e := range entries {
		if !e.IsDir() || live[e.Name()] || ValidRunName(e.Name()) != nil {
			continue
		}
		rw := ws.ForRun(e.Name())
		if _, err := os.Lstat(rw.ClosedPath()); err == nil {
			out = append(out, ReadRunInfo(rw, e.Name(), rw.ClosedPath(), true))
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

// ReserveRun takes a run's name by making its folder, which only one maker
// gets: two starts at once never share a name. want "" takes the plan's name,
// made valid and unique.
func ReserveRun(ws Workspace, want, planName string) (string, error) {
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

// ClosedInfo describes a run just closed.
func ClosedInfo(rw Workspace) RunInfo {
	if rw.Run == "" {
		return RunInfo{Name: MainRun, State: "state.json", Status: RunClosed, Updated: time.Now().UTC().Format(time.RFC3339)}
	}
	return ReadRunInfo(rw, rw.Run, rw.ClosedPath(), true)
}

// ArchiveClosed moves a closed run's state out of the workspace folder, so that no
// driver and no heartbeat takes it up again, and drops the close request.
func (rw Workspace) ArchiveClosed() error {
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

// progress counts a run's steps DONE and, in a run whose steps run side by
// side, lists those in progress.
func progress(st *planspec.State) (done int, inFlight []string) {
	graph := st.IsGraph()
	for _, id := range st.StepQueue {
		switch r := st.StepRuns[id]; {
		case r != nil && r.Status == planspec.StatusDone:
			done++
		case graph && r != nil && r.Status == planspec.StatusInProgress:
			inFlight = append(inFlight, id)
		}
	}
	return done, inFlight
}

// NewRunID is a fresh id for run name: "NAME:nonce".
func NewRunID(name string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return name + ":" + hex.EncodeToString(b[:])
}
