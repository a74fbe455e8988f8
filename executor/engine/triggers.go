package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// DrainTriggers reads and removes the queued triggers, oldest first. A file that
// does not parse is removed and reported: a trigger is a request, not state.
// Anything in the folder that is not a regular file (a FIFO, a device, a link) is
// removed unread, and a directory skipped: nothing there can block the reader.
func DrainTriggers(ws store.Workspace) ([]core.Trigger, []error) {
	root, err := os.OpenRoot(ws.TriggersDir())
	if err != nil {
		return nil, nil
	}
	defer root.Close()
	entries, err := fs.ReadDir(root.FS(), ".")
	if err != nil {
		return nil, nil
	}
	var out []core.Trigger
	var errs []error
	for _, e := range entries { // ReadDir sorts by name: time then pid
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			continue
		}
		data, err := store.ReadFileIn(root, name, store.TriggerCap)
		_ = root.Remove(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("trigger %w", err))
			continue
		}
		var t core.Trigger
		if err := json.Unmarshal(data, &t); err != nil {
			errs = append(errs, fmt.Errorf("trigger %s: %w", name, err))
			continue
		}
		out = append(out, t)
	}
	return out, errs
}

// enqueue queues trigger t for whichever stepseq holds workspace ws, after the
// checks core.CheckTrigger makes; it applies nothing itself.
func enqueue(ws store.Workspace, t core.Trigger) error {
	st, err := (&store.StateFile{Path: ws.State}).Read()
	if err != nil {
		return err
	}
	if err := core.CheckTrigger(st, t); err != nil {
		return err
	}
	return WriteTrigger(ws, t)
}

// queue queues trigger t, with or without a live sidecar, after the checks
// core.CheckTrigger makes; when no stepseq holds the workspace the state is
// reset at once for the next check. It never launches an agent, so a git hook
// never waits.
func queue(rt *Runtime, t core.Trigger) (string, error) {
	id, verb := t.Step, "re-run"
	if t.Retry {
		verb = "get a new try"
	}
	sf := &store.StateFile{Path: rt.WS.State}
	nothing := "nothing to re-run"
	if t.Retry {
		nothing = "nothing to retry"
	}
	st, err := readCommanded(rt.WS, nothing)
	if err != nil {
		return "", err
	}
	if err := core.CheckTrigger(st, t); err != nil {
		return "", fmt.Errorf("%s: %w", rt.WS.State, err)
	}
	maxRetries, err := proc.MaxRetriesFromEnv(rt.Getenv)
	if err != nil {
		return "", err
	}
	holder, err := triggerNow(rt, sf, t, maxRetries)
	switch {
	case err != nil:
		return "", err
	case holder != nil && holder.Kind == "watch":
		return fmt.Sprintf("queued %s for the sidecar (pid %d): it will %s", id, holder.PID, verb), nil
	case holder != nil:
		return fmt.Sprintf("queued %s; a running %s (pid %d) holds the workspace: the next check runs it", id, holder.Kind, holder.PID), nil
	}
	return fmt.Sprintf("%s will %s: no sidecar is running, so the next `stepseq check` runs it", id, verb), nil
}

// triggerNow queues t for whichever stepseq holds the workspace, and returns
// that holder; when none does, it applies every queued trigger now, as the
// sidecar would between two agents, and returns nil.
func triggerNow(rt *Runtime, sf *store.StateFile, t core.Trigger, maxRetries int) (*store.Holder, error) {
	if err := WriteTrigger(rt.WS, t); err != nil {
		return nil, err
	}
	lock, holder, err := store.TryLock(rt.WS, t.From)
	if errors.Is(err, store.ErrLocked) {
		return holder, nil
	}
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	ts, _ := DrainTriggers(rt.WS)
	return nil, applyTriggers(rt, sf, ts, maxRetries, t.From)
}

// applyTriggers applies queued triggers with no sidecar running: through a
// machine, by the rules the sidecar applies between two agents, and writes the
// state it leaves for the next check. The machine is told to stop before it
// reads the state, so it launches nothing and a git hook never waits on an agent.
func applyTriggers(rt *Runtime, sf *store.StateFile, ts []core.Trigger, maxRetries int, from string) error {
	st, err := sf.Read()
	if err != nil {
		return err
	}
	m := core.NewMachine(core.MachineConfig{Driver: from, MaxRetries: maxRetries})
	now := rt.now()
	for _, in := range []core.Input{core.Shutdown{}, core.StateRead{State: st}, core.TriggersIn{Triggers: ts}} {
		for _, e := range m.Handle(now, in) {
			switch e := e.(type) {
			case core.WriteState:
				if err := sf.Write(e.State); err != nil {
					return err
				}
			case core.JournalEntry:
				rt.record(e.Entry)
			case core.Log:
				rt.Logger.Log(context.Background(), e.Level, e.Msg, e.Args...)
			}
		}
	}
	return nil
}

// readCommanded reads the state that a command acts on. A missing one is no
// run, said with what the command cannot do and what makes a run.
func readCommanded(ws store.Workspace, nothing string) (*planspec.State, error) {
	st, err := (&store.StateFile{Path: ws.State}).Read()
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s (no %s: %s; apply a plan with stepseq apply, or drop one in plans/ for a sidecar to start)",
			store.ErrNoRun, ws.RunName(), ws.State, nothing)
	}
	return st, err
}
