package core

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/stepseq/stepseq/planspec"
)

// TryState is what a step's try lock says of one try, for a stepseq that did not
// launch it.
type TryState struct {
	// Alive: the lock is held (the agent, a child of it, or the keeper while
	// anything of the try runs), or a process the try started is found.
	Alive bool
	// Recorded: the record is this try's: its agent was started, or about to be.
	Recorded bool
	// Exited, Code, Signal, TimedOut and Stopped are the end its reaper recorded
	// (the keeper that launched it, or its stepseq).
	Exited   bool
	Code     int
	Signal   string
	TimedOut bool
	Stopped  bool
	// Began is when the try's record was made, on the clock of file times: an
	// output modified after it is the try's work.
	Began time.Time
	// PID is the agent's pid, 0 when it was not recorded.
	PID int
}

// orphan asks the probe about step id's try as state.json records it.
func (m *Machine) orphan(id string) TryState {
	run := m.st.StepRuns[id]
	if run == nil || run.Agent == nil || run.Agent.StartedIso == "" {
		return TryState{}
	}
	return m.cfg.Probe.Orphan(id, run.Tries, run.Agent.StartedIso)
}

// tryProbes are the answers of one decision's probes, a step's try lock asked
// once: its agent may end at any moment, and a decision made of two answers
// (alive when judging the orphan, gone when deciding the step) would relaunch as
// interrupted an agent that had just finished its work. With one answer, an
// agent alive is waited for and judged by what it left once it is gone.
type tryProbes map[string]TryState

// probeOnce is step id's try as the decision's probe found it, asked the first time.
func (m *Machine) probeOnce(p tryProbes, id string) TryState {
	ts, ok := p[id]
	if !ok {
		ts = m.orphan(id)
		p[id] = ts
	}
	return ts
}

// judgeOrphan judges the try at the cursor that state.json holds IN_PROGRESS and
// whose agent no live stepseq saw end, once nothing of the try runs, by what the
// agent left: its exit, recorded by whatever reaped it (the keeper that launched
// it, or a stepseq that died before recording the verdict); else a done report
// it made; else its required outputs, every one modified since the try began,
// with its check holding. An agent killed by a signal stepseq did not send has
// no verdict of its own, but what it started may have finished the work: its
// report and outputs are looked at as an agent's that vanished. It reports
// whether it judged (a verdict, or outputs awaited); when nothing says done,
// the core relaunches the step as interrupted.
func (m *Machine) judgeOrphan(probes tryProbes) bool {
	st := m.st
	if m.cfg.Probe == nil || m.run != nil || st.Status == planspec.StatusDone || st.CurrentStep >= len(st.StepQueue) {
		return false
	}
	return m.judgeOrphanOf(probes, st.StepQueue[st.CurrentStep])
}

// judgeOrphanOf is judgeOrphan of step id's try.
func (m *Machine) judgeOrphanOf(probes tryProbes, id string) bool {
	st := m.st
	run, spec := st.StepRuns[id], st.Steps[id]
	if spec == nil || run == nil || run.Status != planspec.StatusInProgress || run.Agent == nil || run.Agent.StartedIso == "" {
		return false
	}
	ts := m.probeOnce(probes, id)
	if ts.Alive {
		return false // the core waits for it
	}
	started, _ := planspec.ParseISO(run.Agent.StartedIso)
	t := &tryExit{step: id, try: run.Tries, exit: Exit{Started: started, Ended: m.now}}
	_, t.done = lastDone(run, run.Tries)
	var why string
	switch {
	case ts.Exited && ts.Stopped:
		return false // stopped by stepseq: an interruption, no verdict of its own
	case ts.Exited && ts.Signal == "" && ts.Code != brokenPipe:
		t.exit.Code, t.exit.TimedOut = ts.Code, ts.TimedOut
		if ts.Code != 0 {
			t.exit.Stderr = fmt.Sprintf("exit status %d while no stepseq watched it (its output: stepseq logs %s --try %d)", ts.Code, id, run.Tries)
		}
		m.journal(Entry{Event: "orphan", Step: id, Try: run.Tries, Reason: "judged by its exit, recorded by what reaped it",
			Detail: map[string]any{"code": ts.Code}})
		m.log(slog.LevelInfo, "an agent from before the restart ended; judging it by its recorded exit", "step", id, "try", run.Tries, "code", ts.Code)
		m.judge(t)
		return true
	case t.done:
		why = "its done report"
	case ts.Recorded && m.freshOutputs(id, spec, ts.Began):
		why = "its required outputs, all written since the try began"
	default:
		return false
	}
	if v := m.verdict(t); !v.OK {
		m.journal(Entry{Event: "orphan", Step: id, Try: run.Tries, Reason: why + " said done, but the verification fails: the step runs again", Detail: map[string]any{"error": v.Error}})
		return false
	}
	m.journal(Entry{Event: "orphan", Step: id, Try: run.Tries, Reason: "judged done by " + why})
	m.log(slog.LevelInfo, "an agent from before the restart finished its work; judged by what it left", "step", id, "try", run.Tries, "by", why)
	m.conclude(t)
	return true
}

// brokenPipe is the exit of a shell whose command died of SIGPIPE (128+13): an
// agent writing to the output pipe of a stepseq that died ends so, which says
// that stepseq died, not how the agent did; it is judged as a signal's end is.
const brokenPipe = 141

// freshOutputs reports whether the step names required outputs and every one is
// a file modified after began.
func (m *Machine) freshOutputs(id string, spec *planspec.StepSpec, began time.Time) bool {
	if len(spec.RequiredOutputs) == 0 || began.IsZero() {
		return false
	}
	for _, p := range spec.RequiredOutputs {
		mod, ok := m.modTime(id, p)
		if !ok || !mod.After(began) {
			return false
		}
	}
	return true
}
