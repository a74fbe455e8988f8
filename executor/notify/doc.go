// Package notify delivers stepseq's reports to the people and programs that follow
// a plan: one Notice per transition of the state machine, written to an outbox on
// disk and handed from there to every sink in order, at least once.
//
// It owns the outbox (.stepseq/outbox/), the notifications feed
// (.stepseq/notifications.jsonl) and the sinks: a command run for each report, a
// webhook that receives a POST, and the feed itself. It decides nothing: when a
// report is due (a transition, a heartbeat) is the state machine's business in
// package executor, which never imports this package.
//
// Delivery. Emit appends the report to the outbox, fsyncs it and returns; it never
// waits on a sink. Each sink runs in its own goroutine, reads the outbox from its own
// cursor (a file beside the segments) and advances the cursor once a report is
// delivered, so a notifier killed at any instant and started again on the same
// folder delivers what was left, in order. A crash between a delivery and its cursor
// write delivers that report again: receivers drop repeats by Notice.ID.
//
// Runs. A sidecar's Follower routes the reports of every run
// through the one outbox: the command line's sinks and the feed hear every
// run, a plan's sink the runs whose plans list it, and passes over the others'
// reports as delivered. Which plan lists which sink comes with each
// notification, never from reading a state file while the sidecar runs.
//
// Bounds. The outbox is a series of segment files of at most Config.SegmentBytes
// (default 1 MiB); segments every sink has passed are deleted. While a sink is down
// the outbox grows to at most Config.MaxOutboxBytes (default 16 MiB, about 50,000
// typical reports) plus the segment being written; past that the oldest segment is
// dropped, and its reports count as given up for the sinks that had not delivered
// them. Every string field of a report is capped (Output 8 KiB, Next 2 KiB, the
// others 512 bytes): a typical record is about 300 bytes, and none passes 128 KiB
// even with every byte escaped. Memory does not grow with the backlog: a sink
// holds one read buffer (64 KiB, more only for a longer record) and the report it
// is delivering. The feed rotates to notifications.jsonl.1 past Config.FeedBytes
// (default 8 MiB, as the journal).
//
// Retries. A failed delivery is retried with exponential backoff, from
// Retry.Initial (1s) doubling to Retry.Max (5m). A report is given up when an
// attempt fails and the report is older than Retry.For (1h): Config.OnGiveUp is
// called, it is logged, and the sink moves on to the next report. A sink that stays
// down therefore tries at most once per Retry.Max, and a sink that comes back
// delivers the whole backlog at once.
package notify
