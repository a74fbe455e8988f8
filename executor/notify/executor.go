package notify

import (
	"slices"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/planspec"
)

// FromNote is the report of one of the state machine's notifications.
func FromNote(n core.Notification) Notice {
	return Notice{Time: n.Time, Plan: n.Plan, Step: n.Step, Try: n.Try, Who: n.Who,
		Status: n.Status, Event: n.Event, Output: n.Output, Next: n.Next, Run: n.Run, Summary: n.Summary, Spend: n.Spend}
}

// Notify emits the machine's notification: it makes Notifier an
// executor.Notifier. A report that cannot be put in the outbox is logged; the
// plan goes on.
func (n *Notifier) Notify(note core.Notification) {
	if _, err := n.Emit(FromNote(note)); err != nil {
		n.log.Error("report not emitted", "step", note.Step, "status", note.Status, "err", err)
	}
}

// PlanSinks are the sinks of a plan's notify: list, whose commands
// Config.AllowPlanCommand judges.
func PlanSinks(list []planspec.NotifySink) []SinkConfig {
	out := make([]SinkConfig, 0, len(list))
	for _, s := range list {
		out = append(out, SinkConfig{Command: slices.Clone(s.Command), Webhook: s.Webhook, fromPlan: true})
	}
	return out
}
