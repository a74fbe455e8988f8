package core

import "time"

// The sidecar's two waits before it takes something in, as the machine's timers
// (its one timer, SetTimer): the quiet window of the trigger folder, so that a
// burst of triggers is one drain and one re-run, and the settling of a plan file
// that does not parse yet, whose writer may be midway. The machine says when
// (DrainTriggers, IntakePlans); the driver does the reading.

// Trigger folder and plan file waits.
const (
	// DefaultTriggerQuiet is how long the trigger folder must be still before
	// it is drained, and DefaultTriggerHold how long at most a trigger waits for a
	// burst to end.
	DefaultTriggerQuiet = 100 * time.Millisecond
	DefaultTriggerHold  = 30 * time.Second
	// DefaultPlanSettle is how long a plan file that does not parse must have
	// been still before it is judged: a writer (cp, an editor, an agent) may be
	// midway.
	DefaultPlanSettle = 200 * time.Millisecond
)

// TriggersQueued says the trigger folder changed. Modified is the folder's
// modification time, zero when unknown: it says when a trigger last came,
// whatever the lag of the file events. Now asks for a drain at once (the
// triggers queued before a start are a burst already over).
type TriggersQueued struct {
	Modified time.Time
	Now      bool
}

// PlanWriting says a plan file that does not parse yet was last modified at
// Modified: the plans are to be taken in again once it has been still for
// the plan settle (MachineConfig.PlanSettle).
type PlanWriting struct{ Modified time.Time }

func (TriggersQueued) isInput() {}
func (PlanWriting) isInput()    {}

// DrainTriggers asks the driver to read and remove the queued triggers and to
// hand them over as TriggersIn.
type DrainTriggers struct{}

// IntakePlans asks the driver to take in the plans folder again.
type IntakePlans struct{}

func (DrainTriggers) isEffect() {}
func (IntakePlans) isEffect()   {}

// PlanSettling reports whether a plan file modified at modified may still be
// being written at now: it is judged once it has been still for the plan
// settle (MachineConfig.PlanSettle).
func (m *Machine) PlanSettling(now, modified time.Time) bool {
	return now.Sub(modified) < m.planSettle()
}

// FolderTimes is what a Probe may also answer: a folder's modification time.
// The quiet window asks it of the trigger folder when its timer fires, so that
// a trigger whose event is still on its way keeps the window open.
type FolderTimes interface {
	FolderModTime(rel string) (time.Time, bool)
}

// intakeWaits are the machine's intake timers.
type intakeWaits struct {
	trigFirst time.Time // the first change of the trigger folder not drained yet
	trigLast  time.Time // the last one, by its event or the folder's time
	planAt    time.Time // when to take the plans in again
}

// The intake waits as configured, a zero taking its default.
func (m *Machine) triggerQuiet() time.Duration {
	return orDefault(m.cfg.TriggerQuiet, DefaultTriggerQuiet)
}

func (m *Machine) triggerHold() time.Duration {
	return orDefault(m.cfg.TriggerHold, DefaultTriggerHold)
}

func (m *Machine) planSettle() time.Duration {
	return orDefault(m.cfg.PlanSettle, DefaultPlanSettle)
}

// orDefault is d when it is set (above zero), else def.
func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// TriggersPending reports whether triggers wait for the quiet window: they
// may re-run a step, so the plan is not over.
func (m *Machine) TriggersPending() bool { return !m.intake.trigFirst.IsZero() }

func (m *Machine) triggersQueued(in TriggersQueued) {
	w := &m.intake
	if in.Now {
		w.trigFirst, w.trigLast = time.Time{}, time.Time{}
		m.emit(DrainTriggers{})
		return
	}
	if w.trigFirst.IsZero() {
		w.trigFirst = m.now
	}
	w.trigLast = latest(w.trigLast, m.now, in.Modified)
}

// triggersDue is when the queued triggers are drained: once the folder has
// been still for the quiet window, and at most the hold after the first.
func (m *Machine) triggersDue() time.Time {
	w := m.intake
	if w.trigFirst.IsZero() {
		return time.Time{}
	}
	due := w.trigLast.Add(m.triggerQuiet())
	if hold := w.trigFirst.Add(m.triggerHold()); hold.Before(due) {
		return hold
	}
	return due
}

func (m *Machine) planWriting(in PlanWriting) {
	at := in.Modified.Add(m.planSettle() + MtimeSlack)
	if m.intake.planAt.IsZero() || at.Before(m.intake.planAt) {
		m.intake.planAt = at
	}
}

// intakeTimers acts on the intake waits that are due.
func (m *Machine) intakeTimers() {
	w := &m.intake
	if !w.trigFirst.IsZero() && !m.now.Before(m.triggersDue()) {
		if p, ok := m.cfg.Probe.(FolderTimes); ok && m.cfg.TriggersDir != "" {
			if mod, ok := p.FolderModTime(m.cfg.TriggersDir); ok {
				w.trigLast = latest(w.trigLast, mod)
			}
		}
		if !m.now.Before(m.triggersDue()) {
			w.trigFirst, w.trigLast = time.Time{}, time.Time{}
			m.emit(DrainTriggers{})
		}
	}
	if !w.planAt.IsZero() && !m.now.Before(w.planAt) {
		w.planAt = time.Time{}
		m.emit(IntakePlans{})
	}
}

func latest(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if t.After(out) {
			out = t
		}
	}
	return out
}
