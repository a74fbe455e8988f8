package web

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/notify"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
	"github.com/stepseq/stepseq/watcher"
)

// NotesShown is how many of the newest notifications a workspace's page shows.
const NotesShown = 50

// Workspace is the Source of a workspace a sidecar runs: every View reads the
// state file, the notifications feed and the current tries' logs from disk, so
// it never touches the sidecar's memory and is safe from any goroutine. The
// sidecar calls Poke (SidecarOptions.OnChange) after each state write and
// notification.
type Workspace struct {
	Signal

	rt         *engine.Runtime // the page's own: Describe's reads are not shared with the loop
	maxRetries int
	tail       int64

	mu sync.Mutex // Describe uses rt's lazily opened root
}

// NewWorkspace is the page's source for the workspace of rt. maxRetries is
// STEP_MAX_RETRIES, for what the plan waits for; logTail the most of each log
// read (0: DefaultLogTailBytes).
func NewWorkspace(rt *engine.Runtime, maxRetries, logTail int) *Workspace {
	if logTail <= 0 {
		logTail = DefaultLogTailBytes
	}
	return &Workspace{rt: rt, maxRetries: maxRetries, tail: int64(logTail)}
}

// Poke says the workspace changed: the open pages read it again.
func (w *Workspace) Poke() { w.Notify() }

// WatchFeed pokes the pages each time the notifications feed is written, until
// ctx ends: its sinks write it after the notification's OnChange, from their own
// goroutine. The workspace's .stepseq folder must exist (a sidecar made it).
func (w *Workspace) WatchFeed(ctx context.Context) error {
	cfg := watcher.Config{Root: filepath.Dir(w.rt.WS.JournalPath()), Paths: []string{notify.FeedName}}
	armed := make(chan error, 1)
	go func() {
		err := watcher.Follow(ctx, cfg, func(b *watcher.Batch) (time.Duration, bool, error) {
			if b == nil {
				armed <- nil // the first call: the watch is set
			} else {
				w.Poke()
			}
			return 0, false, nil
		})
		if err != nil {
			armed <- err // it failed before its first call
		}
	}()
	return <-armed
}

// View reads the workspace as of now. A state file that cannot be read is a
// page that says so in Waiting, with the notifications still shown.
func (w *Workspace) View() View {
	v := View{Notifications: w.notes()}
	v.Runs = otherRuns(w.rt.WS)
	st, err := (&store.StateFile{Path: w.rt.WS.State}).Read()
	if err != nil {
		v.Status, v.Waiting = "no state", err.Error()
		return v
	}
	w.mu.Lock()
	r, err := engine.Describe(w.rt, st, time.Now(), w.maxRetries)
	w.mu.Unlock()
	v.Plan, v.Status, v.Blockers = r.Plan, r.Run, r.Blockers
	v.Sandbox = r.Sandbox.Lines()
	v.Params, v.Summary = fields(r.Params), fields(r.Summary)
	v.Spend = spendText(r)
	v.Waiting = r.WaitingFor.Reason
	if err != nil {
		v.Waiting = err.Error()
	}
	v.Reports = st.Settings.Reports != ""
	v.Gate = w.gate(st)
	// The logs' tails are read through the workspace, one root for the view.
	root, err := os.OpenRoot(w.rt.WS.Dir)
	if err == nil {
		defer root.Close()
	}
	for i, s := range r.Steps {
		v.Steps = append(v.Steps, w.stepView(root, st, s))
		switch {
		case r.Graph:
			// Steps side by side: an arrow from each step a step needs.
			for _, n := range s.Needs {
				v.Edges = append(v.Edges, [2]string{n, s.ID})
			}
		case i > 0:
			v.Edges = append(v.Edges, [2]string{r.Steps[i-1].ID, s.ID})
		}
	}
	if len(r.Running) > 1 {
		v.Waiting = r.WaitingFor.Reason // names every step at work
	}
	for _, l := range r.Loops {
		v.Loops = append(v.Loops, loopView(l))
		if len(l.Steps) > 0 {
			v.Edges = append(v.Edges, [2]string{l.Steps[len(l.Steps)-1], l.Steps[0]})
		}
	}
	return v
}

// notes are the newest notifications, as the page shows them.
func (w *Workspace) notes() []NoteView {
	out := []NoteView{}
	notes, err := notify.Recent(w.rt.WS.Dir, NotesShown)
	if err != nil {
		return out
	}
	for _, n := range notes {
		out = append(out, NoteView{Time: n.Time, Step: n.Step, Try: n.Try,
			Status: n.Status, Event: n.Event, Output: n.Output, Next: n.Next, Run: n.Run})
	}
	return out
}

// stepView is one step's line: status's report of it, its phase and blocker as
// the core says, its worker's last report and its current try's log tail.
func (w *Workspace) stepView(root *os.Root, st *planspec.State, s engine.StepReport) StepView {
	sv := StepView{ID: s.ID, Title: s.Title, Status: s.Status, Tries: s.Tries,
		DurationMs: s.DurationMs, Running: s.Running, Spend: stepSpendText(s)}
	if s.Error != nil {
		sv.Error = *s.Error
	}
	sv.Phase = phaseOf(st, s.ID)
	if s.Phase == planspec.PhaseWaiting {
		sv.Phase, sv.Waits = PhaseWaiting, s.Waits // held before its start, as status says
	}
	switch b, own := core.StepBlocker(st, s.ID); {
	case own && (sv.Phase == PhaseBlocked || s.Status == planspec.StatusFailed && st.Status != planspec.StatusDone):
		sv.Blocker = b
	case sv.Phase == PhaseBlocked:
		sv.Blocker = sv.Error // a worker's blocked report names it
	}
	if run := st.StepRuns[s.ID]; run != nil && len(run.Reports) > 0 {
		last := run.Reports[len(run.Reports)-1]
		at, _ := planspec.ParseISO(last.Time)
		sv.LastReport = &ReportView{Status: last.Status, Summary: last.Summary, Evidence: last.Evidence,
			Risk: last.Risk, Next: last.Next, Time: at}
	}
	if s.Tries > 0 {
		if p, err := w.rt.WS.ReadLog(root, s.ID, s.Tries, 0, w.tail); err == nil {
			sv.LogTail = string(p.Data)
		}
	}
	return sv
}

// loopView is a repeat group as the graph draws it: its steps, and its round.
func loopView(l engine.LoopReport) LoopView {
	label := l.Group
	switch {
	case l.Ended != "":
		label += fmt.Sprintf(" · ended in round %d/%d", l.Round, l.Max)
	case l.Round > 0:
		label += fmt.Sprintf(" · round %d/%d", l.Round, l.Max)
	}
	return LoopView{Steps: l.Steps, Label: label}
}

// otherRuns are the runs beside the workspace's own, as the page lists them.
func otherRuns(ws store.Workspace) []RunView {
	runs, err := store.ListRuns(ws.ForRun(store.MainRun))
	if err != nil {
		return nil
	}
	var out []RunView
	for _, r := range runs {
		if r.Name != store.MainRun {
			out = append(out, RunView{Name: r.Name, Plan: r.Plan, Status: r.Status, Done: r.Done, Steps: r.Steps, Current: r.Current, Error: r.Error, Awaiting: r.Awaiting,
				Spent: r.Cost})
		}
	}
	return out
}

// phaseOf is a step's phase in the page's words: the core's display phase,
// where a step of a plan without reports is in_progress (the page words it
// "running" itself), and a failed step is blocked when its blocker is
// recorded (the original's record of a step out of retries), else planned
// again for its retry.
func phaseOf(st *planspec.State, id string) string {
	switch phase := core.DisplayPhase(st, id); phase {
	case core.PhaseRunning:
		return PhaseInProgress
	case core.PhaseFailed:
		if _, own := core.StepBlocker(st, id); own {
			return PhaseBlocked
		}
		return PhasePlanned
	default:
		return phase
	}
}

// fields are a plan's named values in name order, each as compact JSON (a
// string as it is), cut to fieldRunes.
func fields(m map[string]any) []Field {
	out := make([]Field, 0, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		v, ok := m[name].(string)
		if !ok {
			b, _ := json.Marshal(m[name])
			v = string(b)
		}
		out = append(out, Field{Name: name, Value: cut(v, fieldRunes)})
	}
	return out
}

// fieldRunes bounds what the page shows of one param or summary value.
const fieldRunes = 200

// gate is the gate st waits on, as the page shows it; nil when none waits.
func (w *Workspace) gate(st *planspec.State) *GateView {
	g, ok := core.WaitingGate(st)
	if !ok {
		return nil
	}
	run := w.rt.WS.Run
	return &GateView{Step: g.Step, Plan: g.Plan, Question: core.GateQuestion(st, g),
		Approve: core.AnswerCommand(run, g, true), Reject: core.AnswerCommand(run, g, false)}
}

// Answer answers a gate of the workspace's run from the page (Gates): the
// engine's Approve or Reject, through a runtime of the call's own.
func (w *Workspace) Answer(a engine.GateAnswer, approve bool) (engine.Answered, error) {
	rt, err := engine.NewRuntime(w.rt.WS.State, w.rt.Logger)
	if err != nil {
		return engine.Answered{}, err
	}
	defer rt.Close()
	rt.Getenv = w.rt.Getenv
	cmds := engine.Commands{WS: rt.WS, RT: rt}
	if approve {
		return cmds.Approve(context.Background(), a)
	}
	return cmds.Reject(context.Background(), a)
}
