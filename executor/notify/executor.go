package notify

import (
	"context"
	"errors"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/stepseq/stepseq/executor"
	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/planspec"
)

// FromNote is the report of one of the state machine's notifications.
func FromNote(n core.Notification) Report {
	return Report{Time: n.Time, Plan: n.Plan, Step: n.Step, Try: n.Try, Who: n.Who,
		Status: n.Status, Event: n.Event, Output: n.Output, Next: n.Next, Run: n.Run, Summary: n.Summary}
}

// Notify emits the machine's notification: it makes Notifier an
// executor.Notifier. A report that cannot be put in the outbox is logged; the
// plan goes on.
func (n *Notifier) Notify(note core.Notification) {
	if _, err := n.Emit(FromNote(note)); err != nil {
		n.log.Error("report not emitted", "step", note.Step, "status", note.Status, "err", err)
	}
}

// PlanSinks are the sinks of a plan's notify: list.
func PlanSinks(list []planspec.NotifySink) []SinkConfig {
	out := make([]SinkConfig, 0, len(list))
	for _, s := range list {
		out = append(out, SinkConfig{Command: slices.Clone(s.Command), Webhook: s.Webhook})
	}
	return out
}

// CloseWait bounds how long Follower waits for a notifier it replaces or closes:
// longer than a stopped command's grace, so that its goroutines have ended
// before another notifier opens the outbox.
const CloseWait = DefaultGrace + 3*time.Second

// Follower is the notifier of a sidecar, whose plan changes while it runs: its
// sinks are Config.Sinks (the command line's) and the notify: list of the plan
// in the state file. Before each notification it looks at the state file, and
// when the plan's list changed it closes its notifier and opens another with the
// new list (undelivered reports stay in the outbox; a sink no longer listed
// drops its backlog). A state file that cannot be read keeps the sinks it has.
//
// Notify is called from the sidecar's loop; Close once the loop has ended.
type Follower struct {
	cfg   Config
	state string

	mu    sync.Mutex
	n     *Notifier
	plan  []planspec.NotifySink
	stamp fileStamp
}

type fileStamp struct {
	mod  time.Time
	size int64
	ino  uint64
}

// NewFollower opens the notifier for the plan in statePath as it is now.
func NewFollower(cfg Config, statePath string) (*Follower, error) {
	f := &Follower{cfg: cfg, state: statePath}
	f.plan, f.stamp = f.readPlan()
	n, err := New(f.config())
	if err != nil {
		return nil, err
	}
	f.n = n
	return f, nil
}

// Notifier is the notifier in use now.
func (f *Follower) Notifier() *Notifier {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// Notify emits note to the sinks of the plan now in the state file.
func (f *Follower) Notify(note core.Notification) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.follow()
	if f.n != nil {
		f.n.Notify(note)
	}
}

// Sync makes the reports emitted so far durable (Notifier.Sync).
func (f *Follower) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == nil {
		return nil
	}
	return f.n.Sync()
}

// Close gives the sinks up to flush to deliver what is in the outbox, then
// closes the notifier in use, waiting at most CloseWait. What is left stays in
// the outbox for the next sidecar.
func (f *Follower) Close(flush time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == nil {
		return nil
	}
	if flush > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), flush)
		_ = f.n.Flush(ctx)
		cancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), CloseWait)
	defer cancel()
	err := f.n.Close(ctx)
	f.n = nil
	return err
}

// follow re-opens the notifier when the plan's sinks changed.
func (f *Follower) follow() {
	if st := stampOf(f.state); st == f.stamp {
		return
	}
	plan, stamp := f.readPlan()
	f.stamp = stamp
	if plan == nil || slices.EqualFunc(plan, f.plan, func(a, b planspec.NotifySink) bool {
		return a.Webhook == b.Webhook && slices.Equal(a.Command, b.Command)
	}) {
		return
	}
	log := f.cfg.Logger
	if f.n != nil {
		log = f.n.log
		ctx, cancel := context.WithTimeout(context.Background(), CloseWait)
		if err := f.n.Close(ctx); err != nil {
			log.Warn("closing the notifier of the previous plan", "err", err)
		}
		cancel()
		f.n = nil
	}
	f.plan = plan
	n, err := New(f.config())
	if err != nil {
		// The plan's sinks are checked when it is applied: this is the disk.
		if log != nil {
			log.Error("notifier for the new plan", "err", err)
		}
		return
	}
	f.n = n
}

func (f *Follower) config() Config {
	cfg := f.cfg
	cfg.Sinks = slices.Clone(f.cfg.Sinks)
	for _, s := range PlanSinks(f.plan) {
		if len(s.Command) > 0 && cfg.AllowPlanCommand != nil && !cfg.AllowPlanCommand(s.Command) {
			if cfg.Logger != nil {
				cfg.Logger.Warn("a plan's notify command is not allowed by --allow-agent; it is left out", "command", s.Command[0])
			}
			continue
		}
		cfg.Sinks = append(cfg.Sinks, s)
	}
	return cfg
}

// readPlan is the notify: list of the plan in the state file; nil when it cannot
// be read (empty, not nil, when the plan lists no sinks).
func (f *Follower) readPlan() ([]planspec.NotifySink, fileStamp) {
	stamp := stampOf(f.state)
	st, err := (&executor.StateFile{Path: f.state}).Read()
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return []planspec.NotifySink{}, stamp
		}
		return nil, stamp
	}
	if st.Settings.Notify == nil {
		return []planspec.NotifySink{}, stamp
	}
	return st.Settings.Notify, stamp
}

func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	s := fileStamp{mod: fi.ModTime(), size: fi.Size()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ino = sys.Ino
	}
	return s
}
