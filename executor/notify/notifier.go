package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/stepseq/stepseq/executor/metrics"
)

// Defaults of Config.
const (
	DefaultTimeout        = 10 * time.Second // one delivery attempt
	DefaultGrace          = 2 * time.Second  // SIGTERM to SIGKILL of a command's group
	DefaultSegmentBytes   = 1 << 20
	DefaultMaxOutboxBytes = 16 << 20
)

// DefaultRetry is the retry policy of every sink: backoff from 1s doubling to 5m,
// and a report given up once it is an hour old and its delivery still fails.
var DefaultRetry = Retry{Initial: time.Second, Max: 5 * time.Minute, For: time.Hour}

// ErrDropped is what OnGiveUp receives for reports the outbox cap removed before a
// sink delivered them (the Notice passed is then empty).
var ErrDropped = errors.New("notify: outbox full, oldest reports dropped")

// SinkConfig is one destination: a command or a webhook, exactly one of them.
type SinkConfig struct {
	Command []string // argv, run without a shell
	Webhook string   // http or https URL

	deliver deliverer // a test's destination, of kind "test", named testID
	testID  string
	// hears, when set, says whether the sink is to deliver the report of
	// sequence number seq and run run (a Follower's plan sinks hear only the
	// runs that list them); one it refuses passes as delivered. nil: every
	// report.
	hears func(seq uint64, run string) bool
	// fromPlan: a plan's notify: sink (PlanSinks), which AllowPlanCommand
	// judges.
	fromPlan bool
}

// id names the sink's cursor: its argv or URL, so that the same sink finds its
// place again after a restart, whichever plan or flag lists it.
func (sc SinkConfig) id() string {
	switch {
	case sc.deliver != nil:
		return sinkID("test", sc.testID)
	case len(sc.Command) > 0:
		return sinkID(KindCommand, sc.Command...)
	default:
		return sinkID(KindWebhook, sc.Webhook)
	}
}

// Retry is a sink's retry policy.
type Retry struct {
	Initial time.Duration // the first wait after a failure
	Max     time.Duration // the longest wait between attempts
	For     time.Duration // a failing report older than this is given up
}

// Config configures a Notifier. Zero fields take the defaults named beside them.
type Config struct {
	Dir string // the workspace, or its .stepseq folder
	// Sinks besides the feed, which is always there. A sink is known across restarts
	// by its argv or URL: one new to the folder starts with the next report, and the
	// cursor of one no longer listed is removed with its backlog (unless
	// KeepUnlisted).
	Sinks []SinkConfig
	// KeepUnlisted keeps the cursors of sinks not in Sinks, and what they have
	// yet to deliver, for a later notifier that lists them: a check or step knows
	// only its own plan's sinks, not those of the workspace's other runs.
	KeepUnlisted bool

	Timeout time.Duration    // of one attempt: a command is stopped, a request cancelled; DefaultTimeout
	Grace   time.Duration    // a stopped command's group is SIGKILLed this long after SIGTERM; DefaultGrace
	Retry   Retry            // DefaultRetry, field by field
	Logger  *slog.Logger     // nil: slog.Default()
	Now     func() time.Time // stamps reports and ages them for Retry.For; nil: time.Now
	// OnGiveUp is called, from the sink's goroutine, when a sink abandons a report:
	// its retries ran out, or the outbox cap dropped it (err wraps ErrDropped). sink
	// is the sink's name as logs show it ("webhook https://host", "command argv0",
	// "file"); a webhook's path and query, which may hold a secret, are left out.
	OnGiveUp   func(sink string, r Notice, err error)
	Registerer *metrics.Registry // nil: no metrics registered
	// AllowPlanCommand, when not nil, says whether a plan's notify: command
	// (a sink PlanSinks made) may run (--allow-agent); one it refuses is left
	// out, and logged.
	AllowPlanCommand func(argv []string) bool
	// HoldUntilPublished keeps each report from the sinks until Publish: a
	// report is recorded before the state write that holds what it says (so
	// that a crash between them loses neither), and delivered after it (so that
	// whoever acts on it, stepseq retry for a step it says is blocked, finds
	// the state saying so).
	HoldUntilPublished bool
	SegmentBytes       int64 // DefaultSegmentBytes
	MaxOutboxBytes     int64 // DefaultMaxOutboxBytes
	FeedBytes          int64 // DefaultFeedBytes
}

// Notifier delivers reports from its outbox to its sinks. Its methods are safe
// for concurrent use. One notifier at a time uses a folder: the holder of the
// workspace lock.
type Notifier struct {
	cfg    Config
	log    *slog.Logger
	ob     *outbox
	feed   *feed
	sinks  []*sink
	m      *series
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// sink is one destination and its goroutine's state.
type sink struct {
	id    string // names the cursor
	name  string // for logs and OnGiveUp
	kind  string
	d     deliverer
	hears func(seq uint64, run string) bool // SinkConfig.hears
	wake  chan struct{}                     // 1 slot: a report is waiting
	fails int                               // consecutive failed attempts
}

// withDefaults is cfg with each zero field given its default.
func (cfg Config) withDefaults() Config {
	orDefault(&cfg.Timeout, DefaultTimeout)
	orDefault(&cfg.Grace, DefaultGrace)
	orDefault(&cfg.Retry.Initial, DefaultRetry.Initial)
	orDefault(&cfg.Retry.Max, DefaultRetry.Max)
	orDefault(&cfg.Retry.For, DefaultRetry.For)
	orDefault(&cfg.SegmentBytes, DefaultSegmentBytes)
	orDefault(&cfg.MaxOutboxBytes, DefaultMaxOutboxBytes)
	orDefault(&cfg.FeedBytes, DefaultFeedBytes)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return cfg
}

// orDefault sets *v to d when it is zero or less.
func orDefault[T ~int64](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// permits says whether sc may be used: a plan's command (a sink PlanSinks
// made) must be one AllowPlanCommand permits. One refused is said to log, when
// there is one.
func (cfg Config) permits(sc SinkConfig, log *slog.Logger) bool {
	if !sc.fromPlan || len(sc.Command) == 0 || cfg.AllowPlanCommand == nil || cfg.AllowPlanCommand(sc.Command) {
		return true
	}
	if log != nil {
		log.Warn("a plan's notify command is not allowed by --allow-agent; it is left out", "command", sc.Command[0])
	}
	return false
}

// New opens the outbox under cfg.Dir, starts one goroutine per sink and delivers
// what an earlier notifier on the same folder left undelivered.
func New(cfg Config) (*Notifier, error) {
	if cfg.Dir == "" {
		return nil, errors.New("notify: no directory")
	}
	cfg = cfg.withDefaults()
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	meta := metaDir(cfg.Dir)
	n := &Notifier{cfg: cfg, log: log.With("component", "notify"), m: newSeries(cfg.Registerer)}
	n.feed = newFeed(filepath.Join(meta, FeedName), cfg.FeedBytes)
	n.sinks = append(n.sinks, &sink{id: KindFile, name: KindFile, kind: KindFile, d: n.feed, wake: make(chan struct{}, 1)})
	seen := map[string]bool{KindFile: true}
	for _, sc := range cfg.Sinks {
		if !cfg.permits(sc, n.log) {
			continue
		}
		s, err := n.newSink(sc, filepath.Dir(meta))
		if err != nil {
			n.closeSinks()
			return nil, err
		}
		if !seen[s.id] {
			seen[s.id] = true
			n.sinks = append(n.sinks, s)
		}
	}
	ids := make([]string, len(n.sinks))
	for i, s := range n.sinks {
		ids[i] = s.id
	}
	ob, err := openOutbox(filepath.Join(meta, "outbox"), cfg.SegmentBytes, cfg.MaxOutboxBytes, ids, cfg.KeepUnlisted)
	if err != nil {
		n.closeSinks()
		return nil, err
	}
	ob.held = cfg.HoldUntilPublished
	n.ob = ob
	n.ctx, n.cancel = context.WithCancel(context.Background())
	for _, s := range n.sinks {
		s.wake <- struct{}{} // deliver what was left
		n.wg.Add(1)
		go n.run(s)
	}
	return n, nil
}

func (n *Notifier) newSink(sc SinkConfig, workspace string) (*sink, error) {
	s := &sink{id: sc.id(), hears: sc.hears, wake: make(chan struct{}, 1)}
	switch {
	case sc.deliver != nil:
		s.kind, s.d = "test", sc.deliver
		s.name = "test " + sc.testID
	case len(sc.Command) > 0 && sc.Webhook == "":
		s.kind = KindCommand
		s.d = &command{argv: sc.Command, dir: workspace, grace: n.cfg.Grace}
		s.name = KindCommand + " " + sc.Command[0]
	case sc.Webhook != "" && len(sc.Command) == 0:
		w, err := newWebhook(sc.Webhook)
		if err != nil {
			return nil, err
		}
		s.kind, s.d = KindWebhook, w
		s.name = KindWebhook + " " + redact(sc.Webhook)
	default:
		return nil, errors.New("notify: a sink is a command or a webhook, exactly one")
	}
	return s, nil
}

// Emit appends r to the outbox and wakes the sinks (a held notifier wakes them
// at Publish); it never waits on one. r is durable once Sync returns (or
// Close). It fills in r's ID, and its Time when zero, caps its fields, and
// returns the report as it will be delivered. An error means r is not in the
// outbox (the disk is full, or the notifier is closed): the caller journals it.
func (n *Notifier) Emit(r Notice) (Notice, error) {
	r, err := n.ob.append(r.capped(), n.cfg.Now())
	if err != nil {
		return r, err
	}
	n.m.emitted.Inc()
	if !n.cfg.HoldUntilPublished { // a held report is no sink's to read before Publish
		n.wakeSinks()
	}
	return r, nil
}

// Publish lets the sinks deliver the reports emitted so far (see
// Config.HoldUntilPublished); the driver calls it once the state writes of an
// input are done.
func (n *Notifier) Publish() {
	n.ob.publish()
	n.wakeSinks()
}

// wakeSinks tells each sink's goroutine that the outbox has more for it; a
// sink already woken is not woken twice.
func (n *Notifier) wakeSinks() {
	for _, s := range n.sinks {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// Sync makes the reports emitted so far durable: one fsync for all of them. The
// driver calls it once an input's effects are done, beside the state folder's
// sync, so that a step's reports cost one fsync, not one each; a machine crash
// before it loses them with the state change they announce.
func (n *Notifier) Sync() error { return n.ob.sync() }

// Close stops the sinks' goroutines, stopping a command or request in flight, and
// closes the outbox. Undelivered reports stay in it for the next notifier. It
// returns ctx's error if the goroutines have not ended when ctx does.
func (n *Notifier) Close(ctx context.Context) error {
	var err error
	n.once.Do(func() {
		n.cancel()
		done := make(chan struct{})
		go func() { n.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			err = ctx.Err()
		}
		n.closeSinks()
		err = errors.Join(err, n.ob.close())
	})
	return err
}

func (n *Notifier) closeSinks() {
	for _, s := range n.sinks {
		if w, ok := s.d.(*webhook); ok {
			w.close()
		}
	}
	_ = n.feed.close()
}

// Flush waits until every sink has delivered (or given up) every report emitted so
// far, or ctx ends. A short-lived driver (check, step) calls it before Close so
// that its reports go out now rather than with the next notifier.
func (n *Notifier) Flush(ctx context.Context) error {
	n.Publish()
	for {
		left, changed := n.ob.behind()
		if left == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-n.ctx.Done():
			return ErrClosed
		case <-ctx.Done():
			return fmt.Errorf("notify: flush: %d reports undelivered: %w", left, ctx.Err())
		}
	}
}

// OutboxBytes is the outbox's size on disk.
func (n *Notifier) OutboxBytes() int64 { return n.ob.bytes() }

// nextSeq is the sequence number the next report emitted takes.
func (n *Notifier) nextSeq() uint64 { return n.ob.nextSeq() }

// passed says whether the sink of cursor id has delivered (or passed) every
// report before seq; false for a sink it does not have.
func (n *Notifier) passed(id string, seq uint64) bool { return n.ob.passed(id, seq) }

// run delivers the outbox to one sink, in order, until Close.
func (n *Notifier) run(s *sink) {
	defer n.wg.Done()
	rd := &reader{sink: s.id}
	defer rd.close()
	log := n.log.With("sink", s.name)
	for {
		rec, dropped, ok, err := n.ob.read(rd)
		if dropped > 0 {
			n.m.givenUp.WithLabelValues(s.kind).Add(float64(dropped))
			err := fmt.Errorf("%w: %d undelivered", ErrDropped, dropped)
			log.Warn("reports dropped", "count", dropped, "cap", n.cfg.MaxOutboxBytes)
			n.giveUp(s, Notice{}, err)
		}
		switch {
		case errors.Is(err, ErrClosed):
			return
		case err != nil:
			log.Error("read outbox", "err", err)
			s.fails++
			if !n.wait(n.backoff(s.fails)) {
				return
			}
			continue
		case !ok:
			select {
			case <-n.ctx.Done():
				return
			case <-s.wake:
			}
			continue
		}
		if !n.deliver(s, log, rec) {
			return
		}
		n.ob.done(s.id, rec.Seq)
	}
}

// deliver tries one report until it is delivered or given up. It returns false
// when the notifier is closing, leaving the report in the outbox.
func (n *Notifier) deliver(s *sink, log *slog.Logger, rec record) bool {
	var r Notice
	if err := json.Unmarshal(rec.Report, &r); err != nil {
		log.Error("unreadable report in outbox", "seq", rec.Seq, "err", err)
		return true
	}
	if s.hears != nil && !s.hears(rec.Seq, r.Run) {
		return true
	}
	for {
		if s.fails > 0 && !n.wait(n.backoff(s.fails)) {
			return false
		}
		ctx, cancel := context.WithTimeoutCause(n.ctx, n.cfg.Timeout,
			fmt.Errorf("no answer in %s", n.cfg.Timeout))
		err := s.d.deliver(ctx, r, rec.Report)
		cancel()
		if err == nil {
			s.fails = 0
			n.m.delivered.WithLabelValues(s.kind).Inc()
			return true
		}
		if n.ctx.Err() != nil {
			return false
		}
		s.fails++
		n.m.failed.WithLabelValues(s.kind).Inc()
		if age := n.cfg.Now().Sub(r.Time); age >= n.cfg.Retry.For {
			n.m.givenUp.WithLabelValues(s.kind).Inc()
			log.Error("report given up", "id", r.ID, "step", r.Step, "status", r.Status, "age", age.Round(time.Second), "err", err)
			n.giveUp(s, r, err)
			return true
		}
		log.Warn("delivery failed", "id", r.ID, "attempt", s.fails, "retry_in", n.backoff(s.fails), "err", err)
	}
}

func (n *Notifier) giveUp(s *sink, r Notice, err error) {
	if n.cfg.OnGiveUp != nil {
		n.cfg.OnGiveUp(s.name, r, err)
	}
}

// backoff is the wait before attempt fails+1: Initial doubling, at most Max.
func (n *Notifier) backoff(fails int) time.Duration {
	d := n.cfg.Retry.Initial
	for i := 1; i < fails && d < n.cfg.Retry.Max; i++ {
		d *= 2
	}
	return min(d, n.cfg.Retry.Max)
}

// wait waits d, or until Close; false means closing.
func (n *Notifier) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-n.ctx.Done():
		return false
	}
}

// series are the notifier's Prometheus series, per sink kind.
type series struct {
	emitted   *metrics.Counter
	delivered *metrics.CounterVec
	failed    *metrics.CounterVec
	givenUp   *metrics.CounterVec
}

func newSeries(reg *metrics.Registry) *series {
	m := &series{
		emitted: metrics.NewCounter(metrics.Opts{
			Name: "stepseq_notify_reports_total", Help: "Reports emitted into the outbox.",
		}),
		delivered: metrics.NewCounterVec(metrics.Opts{
			Name: "stepseq_notify_delivered_total", Help: "Reports delivered, by sink kind.",
		}, []string{"sink"}),
		failed: metrics.NewCounterVec(metrics.Opts{
			Name: "stepseq_notify_failed_total", Help: "Delivery attempts that failed, by sink kind.",
		}, []string{"sink"}),
		givenUp: metrics.NewCounterVec(metrics.Opts{
			Name: "stepseq_notify_given_up_total", Help: "Reports abandoned after their retries or dropped by the outbox cap, by sink kind.",
		}, []string{"sink"}),
	}
	if reg != nil {
		m.emitted = metrics.Registered(reg, m.emitted)
		m.delivered = metrics.Registered(reg, m.delivered)
		m.failed = metrics.Registered(reg, m.failed)
		m.givenUp = metrics.Registered(reg, m.givenUp)
	}
	return m
}
