package notify

import (
	"context"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// CloseWait bounds how long Follower waits for a notifier it replaces or closes:
// longer than a stopped command's grace, so that its goroutines have ended
// before another notifier opens the outbox.
const CloseWait = DefaultGrace + 3*time.Second

// Follower is the notifier of a sidecar, which drives every run of its
// workspace while their plans come and go. The command line's
// sinks (Config.Sinks) and the feed hear every run; a sink of a plan's notify:
// list hears the runs whose plans list it, and a sink listed by two runs is one
// sink, with one cursor, hearing both.
//
// A run's list comes with each of its notifications (core.Notification.Sinks,
// from the state the machine decided on): the Follower keeps, per run, the
// list it last saw, and reads no state file once it has opened. A sink a run's
// list drops still hears the reports the run emitted while it was listed, so
// that a plan's last report reaches its sinks when the next plan follows at
// once; a run that ends, or is closed, keeps its sinks. The notifier is
// re-opened only when the set of sinks changes (undelivered reports stay in the
// outbox): with a sink listed anew, or for one no run lists any more once it
// has delivered what it was to hear.
//
// A sink is known across restarts by its argv or URL, and a notifier that
// opens without a sink drops that sink's backlog. So NewFollower reads the
// plan of each run as its file says: state.json's, each state.NAME.json's and
// each closed run's archive that retention has kept. Their sinks start with
// their undelivered reports, a closed run's until those are delivered.
//
// Notify is called from the sidecar's loop; Close once the loop has ended.
type Follower struct {
	cfg Config

	mu    sync.Mutex
	n     *Notifier
	lists map[string][]planspec.NotifySink // by run ("": state.json), the list last seen
	plan  map[string]SinkConfig            // the plan sinks routed, by cursor id
	open  []string                         // the plan sinks of n, by cursor id, sorted
	seq   uint64                           // n's next sequence number when it was closed
	done  bool                             // Close was called: nothing opens again
	// routes are read by the sinks' goroutines: replaced whole, never changed.
	routes atomic.Pointer[routes]
}

// routes say which runs' reports each plan sink hears: by cursor id, by run,
// the spans of sequence numbers during which the run's plan listed the sink.
type routes map[string]map[string][]span

// span is the sequence numbers from from up to, not including, until; until
// is listed while the run's plan still lists the sink.
type span struct{ from, until uint64 }

const listed = math.MaxUint64

func (rt routes) hears(id string, seq uint64, run string) bool {
	for _, s := range rt[id][run] {
		if s.from <= seq && seq < s.until {
			return true
		}
	}
	return false
}

func (rt routes) clone() routes {
	out := make(routes, len(rt))
	for id, runs := range rt {
		byRun := make(map[string][]span, len(runs))
		for run, spans := range runs {
			byRun[run] = slices.Clone(spans)
		}
		out[id] = byRun
	}
	return out
}

// list makes sink id hear run from seq on.
func (rt routes) list(id, run string, seq uint64) {
	runs := rt[id]
	if runs == nil {
		runs = map[string][]span{}
		rt[id] = runs
	}
	spans := runs[run]
	if n := len(spans); n > 0 && spans[n-1].until == listed {
		return
	}
	runs[run] = append(spans, span{from: seq, until: listed})
}

// unlist ends sink id's hearing of run before seq.
func (rt routes) unlist(id, run string, seq uint64) {
	spans := rt[id][run]
	n := len(spans)
	if n == 0 || spans[n-1].until != listed {
		return
	}
	if spans[n-1].from >= seq {
		spans = spans[:n-1] // it heard nothing yet
	} else {
		spans[n-1].until = seq
	}
	rt[id][run] = spans
}

// NewFollower opens the notifier for the plans of the runs beside statePath,
// the workspace's own state file, as their files say now.
func NewFollower(cfg Config, statePath string) (*Follower, error) {
	return NewFollowerOf(cfg, statePath, nil)
}

// NewFollowerOf is NewFollower for a caller that holds the workspace's state
// as read (main, nil when it has none): its list is taken from main rather
// than from a second read and parse of a file that may be large.
func NewFollowerOf(cfg Config, statePath string, main *planspec.State) (*Follower, error) {
	f := &Follower{cfg: cfg, lists: map[string][]planspec.NotifySink{}, plan: map[string]SinkConfig{}}
	live, closed := startLists(statePath, main)
	rt := routes{}
	for run, list := range live {
		f.lists[run] = list
		for _, sc := range f.allowed(list, true) {
			f.plan[sc.id()] = sc
			rt.list(sc.id(), run, 0)
		}
	}
	for run, list := range closed {
		for _, sc := range f.allowed(list, false) {
			f.plan[sc.id()] = sc
			rt.list(sc.id(), run, 0)
		}
	}
	f.routes.Store(&rt)
	f.open = slices.Sorted(maps.Keys(rt))
	n, err := New(f.config())
	if err != nil {
		return nil, err
	}
	f.n = n
	if len(closed) > 0 {
		// A closed run emits nothing more: its sinks hear what it left.
		end := n.nextSeq()
		after := rt.clone()
		for run := range closed {
			for id := range after {
				after.unlist(id, run, end)
			}
		}
		f.routes.Store(&after)
	}
	return f, nil
}

// startLists are the notify: lists of the runs' plans: of those with a state
// file, by run ("" for statePath), and of the closed runs whose archive is
// kept. A file that cannot be read lists nothing. main, when not nil, is the
// state at statePath as read.
func startLists(statePath string, main *planspec.State) (live, closed map[string][]planspec.NotifySink) {
	live, closed = map[string][]planspec.NotifySink{}, map[string][]planspec.NotifySink{}
	var list []planspec.NotifySink
	if main != nil {
		list = main.Settings.Notify
	} else {
		list = readSinks(statePath)
	}
	if len(list) > 0 {
		live[""] = list
	}
	ws := store.Workspace{Dir: filepath.Dir(statePath)}
	names, _ := store.RunNames(ws)
	for _, name := range names {
		if name == store.MainRun {
			continue
		}
		if list := readSinks(ws.ForRun(name).State); len(list) > 0 {
			live[name] = list
		}
	}
	entries, _ := os.ReadDir(ws.RunsDir())
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || slices.Contains(names, name) || store.ValidRunName(name) != nil || name == store.MainRun {
			continue
		}
		if list := readSinks(ws.ForRun(name).ClosedPath()); len(list) > 0 {
			closed[name] = list
		}
	}
	return live, closed
}

func readSinks(path string) []planspec.NotifySink {
	st, err := (&store.StateFile{Path: path}).Read()
	if err != nil {
		return nil
	}
	return st.Settings.Notify
}

// Notifier is the notifier in use now.
func (f *Follower) Notifier() *Notifier {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// Notify emits note to the command line's sinks, the feed, and the sinks of
// the plans that list note's run.
func (f *Follower) Notify(note core.Notification) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return
	}
	if note.Sinks != nil && !slices.EqualFunc(note.Sinks, f.lists[note.Run], planspec.NotifySink.Equal) {
		f.follow(note.Run, note.Sinks)
	}
	if f.n != nil {
		f.n.Notify(note)
	}
}

// Publish lets the sinks deliver the reports emitted so far.
func (f *Follower) Publish() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n != nil {
		f.n.Publish()
	}
}

// follow takes run's new list: the sinks it lists hear its reports from the
// next one on, those it no longer lists stop there. The notifier is re-opened
// when that changes which sinks there are.
func (f *Follower) follow(run string, list []planspec.NotifySink) {
	next := f.seq
	if f.n != nil {
		next = f.n.nextSeq()
	}
	was := f.lists[run]
	f.lists[run] = make([]planspec.NotifySink, len(list))
	for i, s := range list {
		f.lists[run][i] = planspec.NotifySink{Command: slices.Clone(s.Command), Webhook: s.Webhook}
	}
	rt := f.routes.Load().clone()
	now := map[string]bool{}
	for _, sc := range f.allowed(list, true) {
		now[sc.id()] = true
		f.plan[sc.id()] = sc
		rt.list(sc.id(), run, next)
	}
	for _, sc := range f.allowed(was, false) {
		if !now[sc.id()] {
			rt.unlist(sc.id(), run, next)
		}
	}
	// Spans their sinks have delivered go, and sinks left without any.
	for id, runs := range rt {
		for r, spans := range runs {
			runs[r] = slices.DeleteFunc(spans, func(s span) bool {
				return s.until != listed && f.n != nil && f.n.passed(id, s.until)
			})
			if len(runs[r]) == 0 {
				delete(runs, r)
			}
		}
		if len(runs) == 0 {
			delete(rt, id)
			delete(f.plan, id)
		}
	}
	f.routes.Store(&rt)
	if ids := slices.Sorted(maps.Keys(rt)); !slices.Equal(ids, f.open) || f.n == nil {
		f.reopen(ids)
	}
}

// reopen replaces the notifier with one whose plan sinks are ids.
func (f *Follower) reopen(ids []string) {
	log := f.cfg.Logger
	held := uint64(0) // the first report the old notifier held from its sinks
	if f.n != nil {
		log = f.n.log
		f.seq = f.n.nextSeq()
		held = f.n.ob.published()
		ctx, cancel := context.WithTimeout(context.Background(), CloseWait)
		if err := f.n.Close(ctx); err != nil {
			log.Warn("closing the notifier of the previous sinks", "err", err)
		}
		cancel()
		f.n = nil
	}
	f.open = ids
	n, err := New(f.config())
	if err != nil {
		// The plans' sinks are checked when they are applied: this is the disk.
		if log != nil {
			log.Error("notifier for the new sinks", "err", err)
		}
		return
	}
	if held > 0 {
		// Reopened within an input, it holds what the old one held until the
		// driver publishes, rather than letting it go before the state write.
		n.ob.holdFrom(held)
	}
	f.n = n
}

// config is the notifier's: the command line's sinks, hearing every run, then
// the plan sinks now open, each hearing the runs its routes say.
func (f *Follower) config() Config {
	cfg := f.cfg
	cfg.Sinks = slices.Clone(f.cfg.Sinks)
	for _, id := range f.open {
		sc := f.plan[id]
		sc.hears = func(seq uint64, run string) bool { return f.routes.Load().hears(id, seq, run) }
		cfg.Sinks = append(cfg.Sinks, sc)
	}
	return cfg
}

// allowed are the sinks of a plan's list that may be used: a command
// --allow-agent does not permit is left out, and said when warn is set.
func (f *Follower) allowed(list []planspec.NotifySink, warn bool) []SinkConfig {
	var log *slog.Logger
	if warn {
		log = f.cfg.Logger
	}
	return slices.DeleteFunc(PlanSinks(list), func(s SinkConfig) bool { return !f.cfg.permits(s, log) })
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
	f.done = true
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
