package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"golang.org/x/sys/unix"
)

// MetaDir is stepseq's folder beside the state file.
const MetaDir = core.MetaDir

// Workspace is the folder holding a state file, and stepseq's files beside it.
// It is one run's view of the folder: the workspace's own run,
// state.json, keeps its logs, reports, journal and try locks under .stepseq/;
// the run NAME (state.NAME.json) under .stepseq/runs/NAME/. The lock, the plan
// records, the history and the pull key are the folder's, shared by its runs.
type Workspace struct {
	Dir   string // the state file's directory; required outputs are relative to it
	State string // the state file
	Run   string // the run's name; "" for the workspace's own run (see MainRun)
}

// NewWorkspace lays out the workspace of a state file. A file named
// state.NAME.json, NAME a valid run name, is the run NAME; any other name is
// the workspace's own run, as the original scripts' STATE argument always was.
func NewWorkspace(statePath string) (Workspace, error) {
	abs, err := filepath.Abs(statePath)
	if err != nil {
		return Workspace{}, fmt.Errorf("state path %s: %w", statePath, err)
	}
	return Workspace{Dir: filepath.Dir(abs), State: abs, Run: RunOfStateFile(filepath.Base(abs))}, nil
}

// meta is a path under the folder's .stepseq/, shared by every run.
func (w Workspace) meta(parts ...string) string {
	return filepath.Join(append([]string{w.Dir, MetaDir}, parts...)...)
}

// RunMeta is a path under the run's own folder: .stepseq/ for the workspace's
// own run, .stepseq/runs/NAME/ for the others.
func (w Workspace) RunMeta(parts ...string) string {
	return filepath.Join(w.Dir, filepath.FromSlash(w.runMetaRel()), filepath.Join(parts...))
}

// runMetaRel is runMeta's folder, workspace-relative and slash-separated.
func (w Workspace) runMetaRel() string {
	if w.Run == "" {
		return MetaDir
	}
	return MetaDir + "/" + runsDirName + "/" + w.Run
}

// LockPath is the lock that admits one stepseq at a time. It is never renamed, so
// it outlives every atomic replacement of the state file.
func (w Workspace) LockPath() string { return w.meta("lock") }

// LogPath is the full output of one try. A hand-written state may use any string
// as a step id; the folder name is escaped so that it stays under logs/.
func (w Workspace) LogPath(step string, try int) string {
	return w.RunMeta("logs", safeName(step), strconv.Itoa(try)+".log")
}

// SetAsideEarlierRun keeps the logs of an earlier run of step beside the new run's,
// as try starts: when the step was run again from try 1 (an on: change, a
// trigger, a loop's next round) after earlierTries tries, or when try's log
// exists though the try is new, each of that run's N.log becomes
// earlier-<UTC time>-N.log, so that N.log and `stepseq logs` are the new run's.
// A try that printed nothing left no log: when the earlier run's last try has
// none, an empty earlier-<UTC time>-<earlierTries>.log stands for it, so that
// the run and its tries are counted all the same. Retention prunes them as
// the step's other logs.
func (w Workspace) SetAsideEarlierRun(step string, try, earlierTries int) error {
	if try != 1 {
		earlierTries = 0 // only a run's first try starts a new run
	}
	if _, err := os.Lstat(w.LogPath(step, try)); err != nil && earlierTries == 0 {
		return nil // the usual case: the try's log is new
	}
	dir := filepath.Dir(w.LogPath(step, try))
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("set aside earlier logs: %w", err)
	}
	stamp := time.Now().UTC().Format(ArchiveStamp)
	logged := 0
	for _, e := range entries {
		n := strings.TrimSuffix(e.Name(), ".log")
		t, err := strconv.Atoi(n)
		if err != nil || !e.Type().IsRegular() || n == e.Name() {
			continue
		}
		if err := os.Rename(filepath.Join(dir, e.Name()), filepath.Join(dir, "earlier-"+stamp+"-"+e.Name())); err != nil {
			return fmt.Errorf("set aside earlier logs: %w", err)
		}
		logged = max(logged, t)
	}
	if earlierTries <= logged {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("set aside earlier logs: %w", err)
	}
	silent := filepath.Join(dir, "earlier-"+stamp+"-"+strconv.Itoa(earlierTries)+".log")
	f, err := os.OpenFile(silent, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o644)
	if err != nil {
		return fmt.Errorf("set aside earlier logs: %w", err)
	}
	return f.Close()
}

// safeName makes a step id usable as one path element: separators and other
// unusual bytes are %-escaped, and a name of dots gets a prefix.
func safeName(id string) string {
	name := url.PathEscape(id)
	if strings.Trim(name, ".") == "" {
		name = "_" + name
	}
	return name
}

// TriggersDir queues triggers for the sidecar.
func (w Workspace) TriggersDir() string { return w.RunMeta("triggers") }

// PlansDir holds one record per plan file: its verdict and the hash applied.
func (w Workspace) PlansDir() string { return w.meta("plans") }

// HistoryDir keeps finished states that a new plan replaced.
func (w Workspace) HistoryDir() string { return w.meta("history") }

// JournalPath is the append-only journal of decisions.
func (w Workspace) JournalPath() string { return w.RunMeta("journal.jsonl") }

// ErrLocked is returned by TryLock when another stepseq holds the workspace. Its
// text reaches the user as it is, so it names no package.
var ErrLocked = errors.New("workspace is locked by another stepseq")

// Holder describes the process holding the workspace lock, and the agent it runs.
type Holder struct {
	PID   int          `json:"pid"`
	Kind  string       `json:"kind"` // check, step or watch
	Since string       `json:"since"`
	Agent *AgentHandle `json:"agent,omitempty"`
}

// AgentHandle identifies the process running a try: pid and start time, so that a
// reused pid is never mistaken for the agent.
type AgentHandle struct {
	Step       string `json:"step"`
	Try        int    `json:"try"`
	PID        int    `json:"pid"`
	StartTicks uint64 `json:"startTicks"`
}

// Lock is a held workspace lock: flock(2) on .stepseq/lock, released by the kernel
// when the holder dies, so a crash never leaves the workspace locked. The file also
// says who holds it and which agent runs, for status; that record needs no
// fsync, since no process outlives a machine crash. The record that a later
// Holder trusts is the step's try lock (TryLockPath), which the agent holds.
type Lock struct {
	f      *os.File
	Holder Holder
}

// DeadHolderWait bounds how long TryLock waits for a lock whose recorded holder
// is dead. The kernel frees a flock when the last descriptor of it closes: a
// Holder killed while it started an agent leaves a copy of the descriptor in the
// child between fork and exec, closed by the exec (the descriptor is
// close-on-exec) a moment later.
var DeadHolderWait = 2 * time.Second

// TryLock takes the workspace lock without waiting for a live holder. When
// another process holds it, it returns ErrLocked and what the holder wrote about
// itself. A lock still held while its recorded holder is dead is waited for, a
// short while.
func TryLock(w Workspace, kind string) (*Lock, *Holder, error) {
	if err := os.MkdirAll(w.meta(), 0o755); err != nil {
		return nil, nil, fmt.Errorf("lock: %w", err)
	}
	// Close-on-exec (Go sets it on every open; said here because it matters): no
	// agent may inherit the lock and keep it past its holder's death.
	f, err := os.OpenFile(w.LockPath(), os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("lock: %w", err)
	}
	deadline := time.Now().Add(DeadHolderWait)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, nil, fmt.Errorf("lock %s: %w", w.LockPath(), err)
		}
		h := ReadHolder(w)
		if holderAlive(h) || time.Now().After(deadline) {
			f.Close()
			return nil, &h, ErrLocked
		}
		time.Sleep(pause)
	}
	l := &Lock{f: f,
		Holder: Holder{PID: os.Getpid(), Kind: kind, Since: time.Now().UTC().Format(time.RFC3339)}}
	l.save()
	w.removeStrayTemps()
	return l, nil, nil
}

// LockHeld reports whether a stepseq holds the workspace lock, and which, without
// taking it: the lock file is opened read-only, which works where the workspace
// is read-only (an agent's sandbox) and sees the lock its holder took outside.
func LockHeld(w Workspace) (*Holder, bool, error) {
	f, err := os.OpenFile(w.LockPath(), os.O_RDONLY|unix.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("lock: %w", err)
	}
	defer f.Close()
	switch err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); {
	case err == nil:
		return nil, false, nil // closing the file releases it
	case errors.Is(err, unix.EWOULDBLOCK):
		h := ReadHolder(w)
		return &h, true, nil
	default:
		return nil, false, fmt.Errorf("lock %s: %w", w.LockPath(), err)
	}
}

// removeStrayTemps removes the temporary files that a stepseq killed midway
// through an atomic write left: beside the state file, and under .stepseq/plans
// and .stepseq/history. Only the lock holder writes those, so none is in use.
func (w Workspace) removeStrayTemps() {
	sweep := func(dir string, stray func(name string) bool) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range entries {
			if e.Type().IsRegular() && stray(e.Name()) {
				_ = os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
	state := "." + filepath.Base(w.State)
	sweep(w.Dir, func(name string) bool { return tempOf(name, state) })
	json := func(name string) bool {
		i := strings.LastIndex(name, ".json")
		return strings.HasPrefix(name, ".") && i > 0 && tempOf(name, name[:i+len(".json")])
	}
	sweep(w.PlansDir(), json)
	sweep(w.HistoryDir(), json)
}

// tempOf reports whether name is a temporary file of an atomic write of the file
// whose name, dot-prefixed, is prefix: the prefix then digits.
func tempOf(name, prefix string) bool {
	digits, ok := strings.CutPrefix(name, prefix)
	if !ok || digits == "" {
		return false
	}
	return strings.Trim(digits, "0123456789") == ""
}

// holderAlive reports whether the process a holder record names still runs. A
// record emptied by Unlock names none.
func holderAlive(h Holder) bool {
	if h.PID <= 0 {
		return false
	}
	// Signal 0 only asks whether the pid exists; EPERM means it does, as
	// another user's.
	err := unix.Kill(h.PID, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

func ReadHolder(w Workspace) Holder {
	var h Holder
	if data, err := ReadFile(w.LockPath(), RecordCap); err == nil {
		_ = json.Unmarshal(data, &h)
	}
	return h
}

// lockRecordSize pads the holder record so that each update is one pwrite over the
// Last, with no truncation: JSON ignores the trailing spaces.
const lockRecordSize = 512

func (l *Lock) save() {
	data, _ := json.Marshal(l.Holder)
	if pad := lockRecordSize - 1 - len(data); pad > 0 {
		data = append(data, bytes.Repeat([]byte(" "), pad)...)
	}
	data = append(data, '\n')
	if _, err := l.f.WriteAt(data, 0); err == nil && len(data) > lockRecordSize {
		_ = l.f.Truncate(int64(len(data)))
	}
}

// SetAgent records the agent now running (nil: none).
func (l *Lock) SetAgent(a *AgentHandle) {
	if l == nil || l.f == nil {
		return
	}
	l.Holder.Agent = a
	l.save()
}

// Unlock releases the lock. The file stays: it is the lock's identity.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	_ = l.f.Truncate(0)
	err := l.f.Close() // closing releases the flock
	l.f = nil
	return err
}

// ArchiveStamp is the time layout that starts an archive's name.
const ArchiveStamp = "20060102T150405.000000Z"

// TryLockPath is the n-th file of the pool of try locks. Each run has its own
// pool: a record names a step of one run.
func (w Workspace) TryLockPath(n int) string {
	return w.RunMeta("agents", "try-"+strconv.Itoa(n)+".lock")
}
