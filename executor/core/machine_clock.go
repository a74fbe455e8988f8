package core

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/stepseq/stepseq/planspec"
)

// A time the state records as past (a run's lastRunIso, the first limited
// answer's sinceIso) that lies ahead of the clock says the clock went back:
// measured from it, a one-minute stepDelay or a 30 s limitWait would last until
// the clock caught up. Such a time counts as now, and the journal says so. The
// state is looked at when it is read or applied, and when the clock is seen to
// go back between two inputs, since what this machine wrote itself is then
// ahead of it.

// clampFuture sets every past time of the state that lies after now to now,
// and the untilIso of a limit whose sinceIso was so set to at most now plus its
// limitWait; it journals each and marks the state to be written. It reports
// whether it changed anything.
func (m *Machine) clampFuture() bool {
	if m.st == nil {
		return false
	}
	now := planspec.FormatISO(m.now)
	n := 0
	for _, id := range slices.Sorted(maps.Keys(m.st.StepRuns)) {
		run := m.st.StepRuns[id]
		if run == nil {
			continue
		}
		if m.ahead(run.LastRunIso) {
			m.clamped(id, "lastRunIso", run.LastRunIso, now, "is ahead of the clock, which went back")
			m.st.Run(id).LastRunIso = now
			n++
		}
		if run.Agent != nil && m.ahead(run.Agent.Limit.SinceIso) {
			n += m.clampLimit(id, now)
		}
	}
	if n == 0 {
		return false
	}
	m.log(slog.LevelWarn, "the state holds times ahead of the clock: the clock went back; they count as now", "times", n)
	m.markDirty("times ahead of the clock count as now")
	return true
}

// clampLimit sets the sinceIso of step id's limit to now, and its untilIso to
// no later than now plus its limitWait, the end the wait had when it began. It
// returns how many times it set.
func (m *Machine) clampLimit(id, now string) int {
	run := m.st.Run(id)
	hold := &run.Agent.Limit
	m.clamped(id, "limit.sinceIso", hold.SinceIso, now, "is ahead of the clock, which went back")
	hold.SinceIso = now
	until, err := planspec.ParseISO(hold.UntilIso)
	if end := m.now.Add(LimitWait(m.st, id)); err == nil && until.After(end) {
		m.clamped(id, "limit.untilIso", hold.UntilIso, planspec.FormatISO(end), "is past limitWait from the wait's start")
		hold.UntilIso = planspec.FormatISO(end)
		return 2
	}
	return 1
}

// ahead reports whether iso is a time after now; a time that does not parse
// is none.
func (m *Machine) ahead(iso string) bool {
	if iso == "" {
		return false
	}
	t, err := planspec.ParseISO(iso)
	return err == nil && t.After(m.now)
}

// clamped journals that step id's field, which held was, holds now instead.
func (m *Machine) clamped(id, field, was, now, why string) {
	m.journal(Entry{Event: "clock", Step: id, Reason: fmt.Sprintf("%s %s %s: it counts as %s", field, was, why, now),
		Detail: map[string]any{"field": field, "was": was, "now": now}})
}

// clockBack reports whether now's wall time is before the last input's, and
// remembers it. The monotonic reading is dropped: it never goes back, and the
// state's times are wall times.
func (m *Machine) clockBack(now time.Time) bool {
	wall := now.Round(0)
	back := !m.wall.IsZero() && wall.Before(m.wall)
	m.wall = wall
	return back
}
