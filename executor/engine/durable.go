package engine

import "github.com/stepseq/stepseq/executor/core"

// syncInput makes an input's writes durable once its effects are done, while
// the agent it launched starts: the state's rename (its folder's fsync) and the
// notifications it emitted (the outbox's).
func (d *driver) syncInput() {
	var notes func() error
	if s, ok := d.notifier.(Syncer); ok {
		notes = s.Sync
	}
	var stateErr, notesErr error
	if notes != nil && d.sf.Unsynced() {
		stateErr, notesErr = syncTogether(d.sf.Sync, notes)
	} else {
		stateErr = d.sf.Sync()
		if notes != nil {
			notesErr = notes()
		}
	}
	if stateErr != nil {
		d.rt.Logger.Error("state written but its folder not synced: a power cut may bring the previous state back", "err", stateErr)
		d.rt.record(core.Entry{Event: "write-error", Reason: stateErr.Error()})
	}
	if notesErr != nil {
		d.rt.Logger.Error("notifications written but not synced: a power cut may lose them", "err", notesErr)
		d.rt.record(core.Entry{Event: "notify-error", Reason: notesErr.Error()})
	}
}

// syncTogether runs two fsyncs at once and returns when both have: on a
// journaling file system one commit of the journal serves both, where one
// after the other each waits for a commit of its own.
func syncTogether(a, b func() error) (errA, errB error) {
	done := make(chan error, 1)
	go func() { done <- b() }()
	errA = a()
	return errA, <-done
}
