package executor

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stepseq/stepseq/planspec"
	"github.com/stepseq/stepseq/watcher"
)

// passInput is what woke the loop.
type passInput struct {
	all   bool // start or rescan: look at everything
	batch watcher.Batch
	timer bool
}

// stateReread bounds the re-reads of a state file caught mid-write before the
// sidecar reports it as invalid and waits for the next change.
const stateReread = 8

// pass is one reconcile pass: take in what changed, then let the core decide.
func (s *Sidecar) pass(ctx context.Context, in passInput) {
	s.Logger.Debug("pass", "paths", in.batch.Paths, "rescan", in.batch.Rescan, "timer", in.timer)
	s.opt.Metrics.pass()
	s.passes.Add(1)
	all := in.all || in.batch.Rescan
	if len(in.batch.Paths) > 0 && s.lastGate.IsZero() {
		s.lastGate = time.Now().Add(-s.opt.Settle)
	}
	stateChanged, plansChanged, triggersChanged := all, all, all
	state, plans, triggers := s.rel(s.WS.State), s.rel(s.opt.PlansDir), s.rel(s.WS.TriggersDir())
	for _, p := range in.batch.Paths {
		switch {
		case p == state:
			stateChanged = true
		case under(p, plans):
			plansChanged = true
		case under(p, triggers):
			triggersChanged = true
		}
	}
	if stateChanged || (in.timer && s.bad != nil && !s.badAt.After(time.Now())) {
		s.loadState()
	}
	if plansChanged {
		s.intakePlans()
	}
	if triggersChanged {
		s.takeTriggers()
	}
	if s.pending != nil && s.bad == nil {
		p := s.pending
		s.pending = nil
		s.judge(p.step, p.exit)
	}
	if s.awaiting != nil {
		s.checkAwaiting()
	}
	if s.active == nil && s.awaiting == nil && s.st != nil && s.bad == nil {
		s.applyTriggers()
		if id := OnMatches(s.st, in.batch.Paths, s.notAgentWork); id != "" {
			s.onHandled = time.Now()
			s.rerun(id, "on: a watched file changed")
		}
	}
	s.advance(ctx)
	if s.finished() && s.bad == nil {
		// The plan is over: the next plan waiting in the folder may start.
		s.intakePlans()
		s.advance(ctx)
	}
	s.opt.Metrics.observe(s.st)
	s.rewatch()
	if s.active == nil {
		s.lastGate = time.Time{}
	}
}

// mtimeSlack covers file times taken from the kernel's coarse clock, which lags
// the wall clock by up to a scheduler tick.
const mtimeSlack = 20 * time.Millisecond

// notAgentWork reports whether a changed path is a person's change: not made by an
// agent and not acted on by an earlier pass. A file last modified while an agent
// ran is that agent's work and triggers nothing, however late its event arrives.
func (s *Sidecar) notAgentWork(p string) bool {
	fi, err := os.Stat(filepath.Join(s.WS.Dir, filepath.FromSlash(p)))
	if err != nil || fi.IsDir() {
		return false
	}
	mod := fi.ModTime()
	if !mod.After(s.onHandled) {
		return false
	}
	for _, r := range s.agentRuns {
		if !mod.Before(r[0].Add(-mtimeSlack)) && !mod.After(r[1].Add(mtimeSlack)) {
			return false
		}
	}
	return true
}

func (s *Sidecar) rel(p string) string {
	r, err := filepath.Rel(s.WS.Dir, p)
	if err != nil {
		return p
	}
	return filepath.ToSlash(r)
}

// under reports whether the slash path p is dir or inside it.
func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// loadState reads the state file when it is not what the sidecar last wrote. A
// file that does not parse (a writer midway, or a broken edit) keeps the last good
// state and is read again after a short backoff; it is never overwritten.
func (s *Sidecar) loadState() {
	st, changed, err := s.sf.ReadIfChanged()
	switch {
	case !changed:
		// The echo of the sidecar's own write, or the file put back as it wrote it.
		s.bad, s.badAt, s.badTries = nil, time.Time{}, 0
		return
	case errors.Is(err, fs.ErrNotExist):
		if s.st != nil {
			s.Logger.Info("state file removed")
		}
		s.st, s.conds, s.bad, s.badAt, s.badTries = nil, nil, nil, time.Time{}, 0
		return
	case err != nil:
		s.bad = err
		s.badTries++
		s.Logger.Debug("state file does not parse; reading it again shortly", "try", s.badTries, "err", err)
		if s.badTries <= stateReread {
			s.badAt = time.Now().Add(time.Duration(5<<s.badTries) * time.Millisecond)
			return
		}
		s.badAt = time.Time{}
		if s.badTries == stateReread+1 {
			s.Logger.Error("state file is not valid; the last good state is kept and the file is not overwritten", "err", err)
			s.record(Entry{Event: "state-invalid", Reason: err.Error()})
		}
		return
	}
	if s.bad != nil {
		s.Logger.Info("state file is valid again")
	}
	s.bad, s.badAt, s.badTries = nil, time.Time{}, 0
	s.adopt(st)
	s.record(Entry{Event: "state-read", Detail: map[string]any{"status": st.Status, "cursor": st.CurrentStep}})
}

// adopt makes st the state and compiles its conditions. A state whose expressions
// do not compile is kept but runs nothing until fixed.
func (s *Sidecar) adopt(st *planspec.State) {
	s.st = st
	conds, err := s.Conditions(st)
	if err != nil {
		s.Logger.Error("state file has invalid conditions; nothing runs until they are fixed", "err", err)
		s.record(Entry{Event: "state-invalid", Reason: err.Error()})
		s.conds = nil
		return
	}
	s.conds = conds
}

// write replaces the state file with the loop's state, unless the file on disk is
// unreadable: then the change waits, as a broken file is never overwritten.
func (s *Sidecar) write(reason string) {
	if s.st == nil || s.bad != nil {
		return
	}
	if err := s.sf.Write(s.st); err != nil {
		s.Logger.Error("writing state", "err", err)
		s.record(Entry{Event: "write-error", Reason: err.Error()})
		return
	}
	s.record(Entry{Event: "write", Reason: reason, Detail: map[string]any{"status": s.st.Status, "cursor": s.st.CurrentStep}})
}

// takeTriggers moves queued triggers into the loop; they apply between agents.
func (s *Sidecar) takeTriggers() {
	ts, errs := DrainTriggers(s.WS)
	for _, err := range errs {
		s.Logger.Warn("ignored a trigger", "err", err)
	}
	s.triggers = append(s.triggers, ts...)
}

func (s *Sidecar) applyTriggers() {
	for _, t := range s.triggers {
		if t.Step == "" {
			continue // a handed-over check: this pass is its answer
		}
		s.rerun(t.Step, "trigger from "+t.From)
	}
	s.triggers = nil
}

func (s *Sidecar) rerun(id, reason string) {
	if err := Rerun(s.st, id); err != nil {
		s.Logger.Warn("trigger ignored", "step", id, "err", err)
		return
	}
	s.record(Entry{Event: "trigger", Step: id, Reason: reason})
	s.Logger.Info("re-running step and the ones after it", "step", id, "reason", reason)
	s.write(reason)
}

// advance runs the core and acts on its decision, until it needs to wait.
func (s *Sidecar) advance(ctx context.Context) {
	s.delayAt = time.Time{}
	if s.st == nil || s.bad != nil || s.active != nil || s.awaiting != nil || s.conds == nil || ctx.Err() != nil {
		return
	}
	maxRetries, err := MaxRetriesFromEnv(s.Getenv)
	if err != nil {
		s.Logger.Error("configuration", "err", err)
		return
	}
	now := s.now()
	d, changed := Reconcile(s.st, Facts{Now: now, MaxRetries: maxRetries, Alive: s.lock.AgentAlive, Cond: s.conds.Cond})
	s.record(Entry{Event: "decide", Step: d.Step, Reason: d.Reason, Detail: map[string]any{"action": d.Action.String(), "driver": "watch"}})
	if d.Action != Launch && d.Action != Idle && (d.Step != s.told.Step || d.Reason != s.told.Reason) {
		s.Logger.Info("step waits", "step", d.Step, "why", d.Reason)
	}
	s.told = d
	switch d.Action {
	case Launch:
		s.launch(d, now)
		return
	case Delayed:
		s.delayAt = d.At
	case Running:
		s.waitInherited(ctx)
	}
	if changed {
		s.write(d.Reason)
	}
}

func (s *Sidecar) launch(d Decision, now time.Time) {
	l, err := s.PrepareLaunch(s.st, d, now)
	if err != nil {
		s.Logger.Error("cannot launch the agent", "step", d.Step, "err", err)
		s.record(Entry{Event: "config-error", Step: d.Step, Reason: err.Error()})
		return
	}
	s.write("launch")
	a, err := s.Start(l)
	if err != nil {
		s.judge(l.Step, startFailure(err))
		return
	}
	s.active = a
	s.opt.Metrics.launched(l.Try > 1)
	if !s.lastGate.IsZero() {
		s.opt.Metrics.gate(time.Since(s.lastGate).Seconds())
	}
	s.Logger.Info("agent launched", "step", l.Step, "try", l.Try, "pid", a.PID)
}

// waitInherited waits, without polling, for an agent a previous sidecar left.
func (s *Sidecar) waitInherited(ctx context.Context) {
	if s.inherited != nil || s.lock.Previous == nil {
		return
	}
	ch := make(chan struct{})
	s.inherited = ch
	pid := s.lock.Previous.PID
	s.Logger.Info("an agent from before the restart is still running; waiting for it", "pid", pid, "step", s.lock.Previous.Step)
	go func() {
		_ = WaitGone(ctx, pid)
		close(ch)
	}()
}

// finishTry takes an agent's exit: the state is re-read first, since the agent may
// have edited it, then the try is judged.
func (s *Sidecar) finishTry(exit Exit) {
	a := s.active
	s.active = nil
	s.Finished(a, exit)
	s.agentRuns = append(s.agentRuns, [2]time.Time{exit.Started, exit.Ended})
	if len(s.agentRuns) > 32 {
		s.agentRuns = s.agentRuns[1:]
	}
	s.loadState()
	if s.bad != nil {
		s.pending = &awaiting{step: a.Step, exit: exit}
		return
	}
	s.judge(a.Step, exit)
}

// judge records a finished try; an exit 0 with outputs still missing waits for
// them when the step sets awaitOutputs.
func (s *Sidecar) judge(id string, exit Exit) {
	spec := s.st.Steps[id]
	if spec == nil {
		s.Logger.Warn("step removed from the plan while it ran; result dropped", "step", id)
		return
	}
	if exit.Code == 0 && !exit.TimedOut && exit.Err == nil && spec.AwaitOutputs > 0 && len(MissingOutputs(spec, s.Root())) > 0 {
		s.awaiting = &awaiting{step: id, exit: exit, deadline: exit.Ended.Add(time.Duration(spec.AwaitOutputs))}
		s.Logger.Info("agent exited; waiting for its outputs", "step", id, "until", s.awaiting.deadline.Format(time.RFC3339))
		return
	}
	s.conclude(id, exit)
}

func (s *Sidecar) conclude(id string, exit Exit) {
	v := s.Conclude(s.st, id, exit, s.conds.Check(id))
	if !v.OK {
		s.opt.Metrics.failed()
	}
	s.write("verdict")
}

func (s *Sidecar) checkAwaiting() {
	aw := s.awaiting
	if s.st == nil || s.st.Steps[aw.step] == nil {
		s.awaiting = nil
		return
	}
	if len(MissingOutputs(s.st.Steps[aw.step], s.Root())) == 0 || !time.Now().Before(aw.deadline) {
		s.awaiting = nil
		s.conclude(aw.step, aw.exit)
	}
}
