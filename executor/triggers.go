package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/stepseq/stepseq/planspec"
)

// DrainTriggers reads and removes the queued triggers, oldest first. A file that
// does not parse is removed and reported: a trigger is a request, not state.
// Anything in the folder that is not a regular file (a FIFO, a device, a link) is
// removed unread, and a directory skipped: nothing there can block the reader.
func DrainTriggers(ws Workspace) ([]Trigger, []error) {
	root, err := os.OpenRoot(ws.TriggersDir())
	if err != nil {
		return nil, nil
	}
	defer root.Close()
	entries, err := fs.ReadDir(root.FS(), ".")
	if err != nil {
		return nil, nil
	}
	var out []Trigger
	var errs []error
	for _, e := range entries { // ReadDir sorts by name: time then pid
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			continue
		}
		data, err := ReadFileIn(root, name, TriggerCap)
		_ = root.Remove(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("trigger %w", err))
			continue
		}
		var t Trigger
		if err := json.Unmarshal(data, &t); err != nil {
			errs = append(errs, fmt.Errorf("trigger %s: %w", name, err))
			continue
		}
		out = append(out, t)
	}
	return out, errs
}

// Rerun resets step id and every step after it to run again: PENDING, no tries,
// their blockers gone, the cursor on id (never past an earlier step still to run)
// and the plan IN_PROGRESS.
func Rerun(st *planspec.State, id string) error {
	at := slices.Index(st.StepQueue, id)
	if at < 0 {
		return fmt.Errorf("no step %q in stepQueue (steps: %s)", id, strings.Join(st.StepQueue, ", "))
	}
	for _, later := range st.StepQueue[at:] {
		run := st.Run(later)
		run.Status = planspec.StatusPending
		run.Tries = 0
		run.Error = nil
		run.Stdout = nil
		run.Skipped = false
		run.Agent = nil
		run.Phase = planspec.PhasePlanned
		run.Reports = nil
		run.Result = nil
		clearBlocker(st, later)
	}
	st.CurrentStep = min(st.CurrentStep, at)
	st.Status = planspec.StatusInProgress
	return nil
}

// TriggerBurst is what a batch of queued triggers asks for, coalesced: the
// retries in order, and one re-run from the earliest step any trigger names.
type TriggerBurst struct {
	Retries []Trigger
	Rerun   string   // "" when no trigger asks for a re-run
	Count   int      // the re-run triggers it stands for
	Unknown []string // steps named that the plan does not have
}

// CoalesceTriggers decides what the triggers ts ask of st without changing it: a
// burst of re-runs is one re-run from the earliest step named (it re-runs the
// ones after it too), so ten thousand triggers are one re-run and one write.
// A trigger with no step (a handed-over check) asks for a pass only.
func CoalesceTriggers(st *planspec.State, ts []Trigger) TriggerBurst {
	var b TriggerBurst
	earliest := -1
	for _, t := range ts {
		switch at := slices.Index(st.StepQueue, t.Step); {
		case t.Step == "":
		case t.Retry:
			b.Retries = append(b.Retries, t)
		case at < 0:
			if !slices.Contains(b.Unknown, t.Step) {
				b.Unknown = append(b.Unknown, t.Step)
			}
		default:
			b.Count++
			if earliest < 0 || at < earliest {
				earliest = at
			}
		}
	}
	if earliest >= 0 {
		b.Rerun = st.StepQueue[earliest]
	}
	return b
}

// Retry gives a blocked or failed step a new try, as `stepseq retry` asks: the
// blocker's text and its next go into the error, so the troubleshoot prompt carries
// them, and a step out of tries is granted one more.
func Retry(st *planspec.State, id string, limit int) error {
	if !slices.Contains(st.StepQueue, id) {
		return fmt.Errorf("no step %q in stepQueue (steps: %s)", id, strings.Join(st.StepQueue, ", "))
	}
	run := st.Run(id)
	if run.Status != planspec.StatusFailed && run.Phase != planspec.PhaseBlocked {
		return fmt.Errorf("step %s is %s, not blocked or failed: `stepseq trigger %s` re-runs a finished step", id, strings.ToLower(run.Status), id)
	}
	why := workerBlocker(st, id)
	if run.Error != nil && *run.Error != "" && !strings.Contains(why, *run.Error) {
		why = *run.Error + "; " + why
	}
	// A worker's blocker line names its next already: the prompt says it once.
	if next := blockerNext(run); next != "" && !strings.Contains(why, "next: "+oneLine(next)) {
		why += "; next: " + next
	}
	run.Error = &why
	if run.Tries == 0 {
		run.Tries = 1 // the troubleshoot prompt needs a try to name
	}
	run.Status = planspec.StatusFailed
	run.Phase = planspec.PhasePlanned
	if run.Tries >= limit {
		if run.Agent == nil {
			run.Agent = &planspec.AgentRecord{}
		}
		run.Agent.Granted += run.Tries - limit + 1
	}
	clearBlocker(st, id)
	if at := slices.Index(st.StepQueue, id); at < st.CurrentStep {
		st.CurrentStep = at
	}
	st.Status = planspec.StatusInProgress
	return nil
}

// blockerNext is the next of the worker's last blocked report.
func blockerNext(run *planspec.StepRun) string {
	for i := len(run.Reports) - 1; i >= 0; i-- {
		if r := run.Reports[i]; r.Status == planspec.ReportBlocked {
			return r.Next
		}
	}
	return ""
}

// QueueTrigger asks for step id to re-run, with or without a live sidecar: the
// trigger is queued, and when no stepseq holds the workspace the state is reset at
// once for the next check. It never launches an agent, so a git hook never waits.
func QueueTrigger(rt *Runtime, id string) (string, error) {
	return queue(rt, Trigger{Step: id, From: "trigger"})
}

// QueueRetry asks for a new try of blocked or failed step id (`stepseq retry`),
// with or without a live sidecar, as QueueTrigger does. A step that is neither
// blocked nor failed is refused at once.
func QueueRetry(rt *Runtime, id string) (string, error) {
	return queue(rt, Trigger{Step: id, From: "retry", Retry: true})
}

func queue(rt *Runtime, t Trigger) (string, error) {
	id, verb := t.Step, "re-run"
	if t.Retry {
		verb = "get a new try"
	}
	sf := &StateFile{Path: rt.WS.State}
	st, err := sf.Read()
	if err != nil {
		return "", err
	}
	if !slices.Contains(st.StepQueue, id) {
		return "", fmt.Errorf("no step %q in %s (steps: %s)", id, rt.WS.State, strings.Join(st.StepQueue, ", "))
	}
	maxRetries, err := MaxRetriesFromEnv(rt.Getenv)
	if err != nil {
		return "", err
	}
	if t.Retry {
		if err := Retry(st.Clone(), id, RetryLimit(st, id, maxRetries)); err != nil {
			return "", err
		}
	}
	if err := WriteTrigger(rt.WS, t); err != nil {
		return "", err
	}
	lock, holder, err := TryLock(rt.WS, t.From)
	if errors.Is(err, ErrLocked) {
		if holder.Kind == "watch" {
			return fmt.Sprintf("queued %s for the sidecar (pid %d): it will %s", id, holder.PID, verb), nil
		}
		return fmt.Sprintf("queued %s; a running %s (pid %d) holds the workspace: the next check runs it", id, holder.Kind, holder.PID), nil
	}
	if err != nil {
		return "", err
	}
	defer lock.Unlock()
	ts, _ := DrainTriggers(rt.WS)
	if st, err = sf.Read(); err != nil {
		return "", err
	}
	b := CoalesceTriggers(st, ts) // the rules the sidecar applies, without one
	for _, r := range b.Retries {
		if err := Retry(st, r.Step, RetryLimit(st, r.Step, maxRetries)); err != nil {
			rt.Logger.Warn("retry refused", "step", r.Step, "err", err)
		}
	}
	if b.Rerun != "" {
		if err := Rerun(st, b.Rerun); err != nil {
			rt.Logger.Warn("trigger ignored", "step", b.Rerun, "err", err)
		}
	}
	for _, id := range b.Unknown {
		rt.Logger.Warn("trigger ignored", "step", id, "err", "no such step in stepQueue")
	}
	if err := sf.Write(st); err != nil {
		return "", err
	}
	rt.record(Entry{Event: t.From, Step: id, Reason: "no sidecar: state reset for the next check"})
	return fmt.Sprintf("%s will %s: no sidecar is running, so the next `stepseq check` runs it", id, verb), nil
}
