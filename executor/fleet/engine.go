package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
	"github.com/stepseq/stepseq/planspec/plan"
)

// Every use of the engine is in this file: a run's workspace is driven by the
// engine's sidecar, as stepseq watch drives one, and the fleet reads the
// state the engine writes.

// CheckRunName refuses a run name the engine would refuse: it names the
// run's branch and its key in the bucket too.
func CheckRunName(name string) error { return store.ValidRunName(name) }

// workspace is one run's workspace under the engine.
type workspace struct {
	rt    *engine.Runtime
	state string // the workspace's state.json
	// plansDir is an empty folder for the sidecar's plan intake: a run is the
	// plan it was submitted with, never the plans its repository holds.
	plansDir string
}

func openEngine(dir string, log *slog.Logger) (*workspace, error) {
	state := store.RunStatePath(dir, "")
	rt, err := engine.NewRuntime(state, log)
	if err != nil {
		return nil, err
	}
	plans := filepath.Join(dir, ".stepseq", "fleet", "plans")
	if err := os.MkdirAll(plans, 0o755); err != nil {
		rt.Close()
		return nil, err
	}
	return &workspace{rt: rt, state: state, plansDir: plans}, nil
}

func (e *workspace) close() { e.rt.Close() }

// applyPlan starts the job's plan afresh in the workspace, with its params,
// as stepseq apply --force does.
func (e *workspace) applyPlan(job Job) error {
	file := job.File
	if file == "" {
		file = job.Run + ".yaml"
	}
	path := filepath.Join(filepath.Dir(e.plansDir), filepath.Base(file))
	if err := os.WriteFile(path, job.Plan, 0o644); err != nil {
		return fmt.Errorf("write the plan: %w", err)
	}
	pf := engine.ReadPlanFile(path, ".stepseq/fleet/"+filepath.Base(file))
	if pf.Plan == nil {
		return pf.Err
	}
	pf.Params = job.Params
	_, _, err := e.rt.ApplyPlan(&store.StateFile{Path: e.state}, pf, true)
	return err
}

// restoreState puts the fleet's newest state of the run in place of what the
// branch holds: a step the state says was running is judged by the engine as
// an interrupted try, since no try of it runs here.
func (e *workspace) restoreState(data []byte) error {
	if _, err := planspec.ParseStateBytes(data, "the fleet's state"); err != nil {
		return err
	}
	return renameio.WriteFile(e.state, data, 0o644)
}

// retry gives step a new try, as stepseq retry does: at once when the
// sidecar runs, else when it starts. id, when not "", is the command's: the
// state lists it once the retry is made.
func (e *workspace) retry(step, id string) (string, error) {
	return e.command(id, func(cmds engine.Commands) (string, error) {
		return cmds.Retry(context.Background(), step, "retry")
	})
}

// answer gives a person's answer to a gate, as stepseq approve or reject
// does; id as for retry.
func (e *workspace) answer(a GateAnswer, by, id string) (string, error) {
	return e.command(id, func(cmds engine.Commands) (string, error) {
		give := cmds.Approve
		if !a.Approve {
			give = cmds.Reject
		}
		got, err := give(context.Background(), engine.GateAnswer{Step: a.Step, Note: a.Note, By: by, Face: "fleet"})
		return got.Message, err
	})
}

// budget makes a change to the run's budget, as stepseq budget does: at once
// when the sidecar does not run yet, else in its loop; id as for retry.
func (e *workspace) budget(o BudgetOrder, id string) (string, error) {
	return e.command(id, func(cmds engine.Commands) (string, error) {
		return cmds.Budget(context.Background(), o.Step, o.Changes, "fleet")
	})
}

// command gives do the engine's commands under id, through a runtime of its
// own: the sidecar's belongs to the sidecar's loop.
func (e *workspace) command(id string, do func(engine.Commands) (string, error)) (string, error) {
	rt, err := engine.NewRuntime(e.state, e.rt.Logger)
	if err != nil {
		return "", err
	}
	defer rt.Close()
	return do(engine.Commands{WS: rt.WS, RT: rt, ID: id})
}

// startState is the state rec's run goes on from: the newest its record
// holds or, for a run no worker has started, the one its plan starts with,
// as far as budgets go (the plan's and its steps').
func startState(rec Record) (*planspec.State, error) {
	if len(rec.State) > 0 {
		return planspec.ParseStateBytes(rec.State, "run "+rec.Run+"'s state")
	}
	if rec.Job == nil {
		return nil, fmt.Errorf("%s's record holds neither a state nor a plan (made by hand?): submit it again", rec.Run)
	}
	p, err := plan.ParsePlan(bytes.NewReader(rec.Job.Plan), rec.Job.File)
	if err != nil {
		return nil, err
	}
	st := p.State(rec.Job.File, "")
	st.Settings.Budget = p.Budget
	return st, nil
}

// hasState reports whether the workspace holds a state file: a resumed run's
// branch carries the one of its last verified step.
func (e *workspace) hasState() bool {
	_, err := os.Stat(e.state)
	return err == nil
}

// readState reads the workspace's state.json as it is.
func (e *workspace) readState() ([]byte, error) { return store.ReadFile(e.state, store.StateCap) }

// errBlocked is a run held by a blocker: the engine's word for it.
var errBlocked = engine.ErrPlanBlocked

// Notifier opens the notifier of a run's workspace, as stepseq watch opens
// its own: the plan's sinks and the worker's. It is called once the engine
// holds the workspace; close delivers what it can and releases it.
type Notifier func(rt *engine.Runtime) (n engine.Notifier, close func(), err error)

// lateNotifier is the sidecar's notifier, opened once the sidecar holds the
// workspace lock, before anything is notified. Its notifications name the
// fleet's run: in its workspace the run is the workspace's own.
type lateNotifier struct {
	n   engine.Notifier
	run string
}

func (l *lateNotifier) Notify(note core.Notification) {
	if l.n != nil {
		if note.Run == "" {
			note.Run = l.run
		}
		l.n.Notify(note)
	}
}

// Sync keeps the notifier's promise to the driver: its notifications are on
// disk once Sync returns.
func (l *lateNotifier) Sync() error {
	if s, ok := l.n.(engine.Syncer); ok {
		return s.Sync()
	}
	return nil
}

// Publish keeps the notifier's other promise: its notifications reach its
// sinks once the driver has written the state that holds what they say.
func (l *lateNotifier) Publish() {
	if p, ok := l.n.(engine.Publisher); ok {
		p.Publish()
	}
}

// run drives the workspace until its plan is done (nil), blocked (errBlocked),
// cannot go on here (the engine's error), or ctx ends (nil). onChange is
// called from the engine's loop after each state write, onReady once its
// start is over (the workspace its own): neither may block. notifier, when
// not nil, tells the run's transitions as watch does.
func (e *workspace) run(ctx context.Context, run string, onChange, onReady func(), notifier Notifier) error {
	notes := &lateNotifier{run: run}
	sc, err := engine.NewSidecar(e.rt, engine.SidecarOptions{
		PlansDir: e.plansDir, ExitWhenDone: true, OnChange: onChange, OnReady: onReady, Notifier: notes,
	})
	if err != nil {
		return err
	}
	if notifier != nil {
		n, closeN, err := notifier(e.rt)
		if err != nil {
			return fmt.Errorf("notifications: %w", err)
		}
		notes.n = n
		defer closeN()
	}
	return sc.Run(ctx)
}

// summary is what the fleet's view shows of a state.
type summary struct {
	status   string // the state's: IN_PROGRESS, DONE
	step     string
	phase    string
	done     int
	steps    int
	blockers []string
	spend    json.RawMessage
	// applied are the ids of the commands the state holds applied.
	applied []string
	// verified are the DONE steps with the time of their last run: a change
	// in it is a step verified since.
	verified map[string]string
}

func summarize(data []byte) (summary, error) {
	st, err := planspec.ParseStateBytes(data, "state.json")
	if err != nil {
		return summary{}, err
	}
	s := summary{status: st.Status, steps: len(st.StepQueue), blockers: st.Blockers, applied: st.Settings.Applied, verified: map[string]string{}}
	for id, r := range st.StepRuns {
		if r != nil && r.Status == planspec.StatusDone {
			s.done++
			s.verified[id] = r.LastRunIso
		}
	}
	if st.CurrentStep >= 0 && st.CurrentStep < len(st.StepQueue) {
		s.step = st.StepQueue[st.CurrentStep]
		s.phase = core.DisplayPhase(st, s.step)
	}
	if !st.Settings.Spend.IsZero() {
		s.spend, _ = json.Marshal(st.Settings.Spend)
	}
	return s, nil
}

// checkPlan parses a plan and checks the params given against it, as stepseq
// apply does before it writes anything; it returns the plan's name.
func checkPlan(data []byte, file string, params map[string]any) (string, error) {
	p, err := plan.ParsePlan(bytes.NewReader(data), file)
	if err != nil {
		return "", err
	}
	if _, err := p.ResolveParams(params); err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	name := p.Name
	if name == "" {
		name = plan.PlanName(file)
	}
	return name, nil
}

// isBlocked reports whether err is the engine's word for a blocked plan.
func isBlocked(err error) bool { return errors.Is(err, errBlocked) }
