package core

import (
	"log/slog"
	"slices"

	"github.com/stepseq/stepseq/planspec"
)

// A command that carries an id (Trigger.ID) is applied once: the state
// lists the ids of the commands last applied, written with their effect, so
// that whoever hands a command again after a crash (a fleet's next holder)
// can tell one applied from one lost, and the machine skips one it lists.

// Applied reports whether st lists id among the commands applied to it.
func Applied(st *planspec.State, id string) bool {
	return st != nil && id != "" && slices.Contains(st.Settings.Applied, id)
}

// notApplied are ts but the triggers whose command the state held lists as
// applied already, or that an earlier trigger of ts carries too (a command
// handed twice before either was applied); each left out is said in the log.
func (m *Machine) notApplied(ts []Trigger) []Trigger {
	seen := map[string]bool{}
	return slices.DeleteFunc(slices.Clone(ts), func(t Trigger) bool {
		if t.ID == "" {
			return false
		}
		if !seen[t.ID] && !Applied(m.st, t.ID) {
			seen[t.ID] = true
			return false
		}
		m.log(slog.LevelInfo, "command applied already: not applied again", "id", t.ID, "step", t.Step)
		return true
	})
}

// noteApplied lists the ids of ts, applied (or refused) now, in the state,
// so that the write that holds their effect holds them too; the list keeps
// the newest planspec.MaxAppliedKept.
func (m *Machine) noteApplied(ts []Trigger) {
	noted := false
	for _, t := range ts {
		if t.ID == "" || Applied(m.st, t.ID) {
			continue
		}
		m.st.Settings.Applied = append(m.st.Settings.Applied, t.ID)
		noted = true
	}
	if !noted {
		return
	}
	if n := len(m.st.Settings.Applied); n > planspec.MaxAppliedKept {
		m.st.Settings.Applied = slices.Clone(m.st.Settings.Applied[n-planspec.MaxAppliedKept:])
	}
	if !m.dirty {
		m.markDirty("command applied")
	}
}
