package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Why a run's context ends before its plan does.
var (
	errClosed   = errors.New("closed by stepseq close")
	errShutdown = errors.New("the worker is stopping")
)

// pushError is a push the remote refused, or could not take: the run is
// blocked with git's reason.
type pushError struct{ err error }

func (e *pushError) Error() string { return e.err.Error() }
func (e *pushError) Unwrap() error { return e.err }

// runner is one run on this worker, from its lease taken to its message acked.
type runner struct {
	w      *Worker
	job    Job
	msg    jetstream.Msg
	log    *slog.Logger
	l      *lease
	cancel context.CancelCauseFunc

	dir string
	co  *checkout
	e   *workspace

	// The engine's loop (changed) owns these while it runs.
	seen     []byte            // the state last read
	verified map[string]string // the steps pushed as verified, with their run's time
	begun    bool              // the branch's first commit is made

	// The mirror's goroutine owns these while the engine runs.
	latest    atomic.Pointer[snapshot] // the newest state read, for the bucket
	pokes     chan struct{}            // latest-wins: a state to mirror
	mirrored  []byte                   // the state last written to the bucket
	closedBy  string
	mirrorEnd chan struct{}

	// budgetMade: the engine has made the budget changes the record kept,
	// so the record's next state holds them and drops them.
	budgetMade bool

	// Whoever acts on the run's commands owns these (drive at the start,
	// then the mirror's goroutine): the commands acted on, by key, and those
	// whose key the bucket still holds.
	acted     map[string]bool
	unremoved []controlEntry
	// handed are the commands handed to the engine whose keys leave the
	// bucket once a state mirrored lists their ids; applied are the ids the
	// newest state mirrored (or, at the start, restored) lists.
	handed  []controlEntry
	applied []string
}

// handle runs one message's run to its end, or until the worker stops or
// loses the run's lease.
func (w *Worker) handle(ctx context.Context, msg jetstream.Msg) {
	var job Job
	if err := json.Unmarshal(msg.Data(), &job); err != nil || CheckRunName(job.Run) != nil {
		w.log.Error("a message on the queue that is not a run: dropped", "subject", msg.Subject(), "err", err)
		_ = msg.Term()
		return
	}
	log := w.log.With("run", job.Run)
	l, skip, prev, err := takeLease(ctx, w.c.KV, job, w.opt.Name, w.opt.Lease)
	switch {
	case err != nil:
		log.Warn("run not taken: it goes back to the queue", "err", err)
		_ = msg.NakWithDelay(w.opt.Lease / 3)
		return
	case skip:
		log.Info("run not started: its record says it is over, or another run has its name", "status", prev.Status, "id", prev.ID)
		_ = msg.Ack()
		return
	}
	r := &runner{w: w, job: job, msg: msg, log: log.With("attempt", l.rec.Attempt), l: l, pokes: make(chan struct{}, 1), acted: map[string]bool{}}
	r.run(ctx, prev)
}

func (r *runner) run(ctx context.Context, prev Record) {
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	r.cancel = cancel
	defer cancel(nil)
	stop := context.AfterFunc(ctx, func() { cancel(errShutdown) })
	defer stop()
	keeping := r.keep(runCtx)
	r.log.Info("run taken", "resumed", len(prev.State) > 0, "retry", r.job.Retry)
	err := r.drive(runCtx, prev)
	cause := context.Cause(runCtx) // nil unless something ended the run early
	cancel(nil)
	<-keeping
	r.finish(err, cause)
}

// keep renews the lease while the run lives: the message acked in progress
// and the record touched every third of the lease; half the lease without a
// write is a lease lost. It returns a channel closed once it has stopped.
func (r *runner) keep(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	ttl := r.w.opt.Lease
	go func() {
		defer close(done)
		renew := time.NewTicker(ttl / 3)
		defer renew.Stop()
		watch := time.NewTicker(max(ttl/12, 10*time.Millisecond))
		defer watch.Stop()
		renewed := make(chan error, 1)
		inflight := false
		for {
			select {
			case <-ctx.Done():
				if inflight {
					<-renewed
				}
				return
			case <-renew.C:
				if inflight {
					continue
				}
				inflight = true
				go func() {
					_ = r.msg.InProgress()
					renewed <- r.l.update(ctx, func(*Record) {})
				}()
			case err := <-renewed:
				inflight = false
				if errors.Is(err, ErrLeaseLost) {
					r.cancel(err)
				} else if err != nil {
					r.log.Warn("lease not renewed", "err", err, "silent", r.l.silent().Round(time.Millisecond))
				}
				r.poke() // a state whose write failed is written again
			case <-watch.C:
				if r.l.expiring() {
					r.cancel(fmt.Errorf("%w: no write for %s, half the lease", ErrLeaseLost, r.l.silent().Round(time.Millisecond)))
				}
			}
		}
	}()
	return done
}

func (r *runner) poke() {
	select {
	case r.pokes <- struct{}{}:
	default:
	}
}

// drive clones the run, puts its plan or its newest state in place and runs
// it with the engine until it ends or ctx does.
func (r *runner) drive(ctx context.Context, prev Record) error {
	if err := r.holdOff(ctx, prev); err != nil {
		return err
	}
	r.dir = filepath.Join(r.w.opt.Workdir, fmt.Sprintf("%s.%d", r.job.Run, r.l.rec.Attempt))
	if err := os.RemoveAll(r.dir); err != nil {
		return fmt.Errorf("clear the workspace %s: %w", r.dir, err)
	}
	co, err := cloneRun(ctx, r.job.Repo, r.job.Branch, r.job.Run, r.dir, prev.Attempt == 0)
	if err != nil {
		return withDiskNote(err, r.w.opt.Workdir)
	}
	r.co = co
	e, err := openEngine(r.dir, r.log)
	if err != nil {
		return err
	}
	defer e.close()
	e.rt.Grace = min(e.rt.Grace, r.w.opt.Lease/5)
	r.e = e
	switch {
	case len(prev.State) > 0:
		err = e.restoreState(prev.State)
	case co.pushed != "" && e.hasState():
		// The bucket holds no state (it was too big for a message): the
		// branch's, of the last verified step, is the newest there is.
	default:
		err = e.applyPlan(r.job)
	}
	if err != nil {
		return fmt.Errorf("start the plan: %w", err)
	}
	r.makeBudget(prev.Budget)
	if r.job.Retry != "" {
		if said, err := e.retry(r.job.Retry, ""); err != nil {
			r.log.Warn("retry refused", "step", r.job.Retry, "err", err)
		} else {
			r.log.Info(said)
		}
	}
	// The commands that wait are made before anything launches, and leave
	// the bucket once the state that holds them is there.
	controls := r.watchControl(ctx)
	r.readApplied()
	acted := r.actOnWaiting(ctx, controls)
	// The branch exists from the start, so that a push the remote refuses
	// blocks the run before any agent works for nothing.
	if err := r.settle(ctx, ""); err != nil {
		return err
	}
	r.removeCommands(ctx, acted)
	r.mirrorEnd = make(chan struct{})
	ready := make(chan struct{})
	mirrorDone := r.mirrorLoop(ctx, controls, ready)
	err = e.run(ctx, r.job.Run, func() { r.changed(ctx) }, func() { close(ready) }, r.w.opt.Notifier)
	close(r.mirrorEnd)
	<-mirrorDone
	return err
}

// holdOff waits, when the run's last holder renewed its lease lately, until
// it must have stopped its agent: a redelivery comes a whole lease after the
// holder's last word, so this waits only when the holder still spoke to the
// server but not to the queue.
func (r *runner) holdOff(ctx context.Context, prev Record) error {
	if prev.Status != StatusRunning || prev.Renewed.IsZero() {
		return nil
	}
	ttl := r.w.opt.Lease
	wait := min(time.Until(prev.Renewed.Add(ttl/2+ttl/5)), ttl)
	if wait <= 0 {
		return nil
	}
	r.log.Info("the run's last holder spoke lately: waiting for it to stop", "holder", prev.Worker, "wait", wait.Round(time.Millisecond))
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(wait):
		return nil
	}
}

// changed is the engine's word that it wrote the state: called from its
// loop, before it launches the next step's agent. Steps verified since the
// last commit are committed here, before the next agent can touch the
// workspace, so that each is a commit of its own. The push and the state's
// write to the bucket follow from the mirror's goroutine, the push first:
// the bucket never says a step is done that the branch does not hold.
func (r *runner) changed(ctx context.Context) {
	data, err := r.e.readState()
	if err != nil || bytes.Equal(data, r.seen) {
		return
	}
	r.seen = data
	sum, err := summarize(data)
	if err != nil {
		return
	}
	if err := r.commitVerified(ctx, sum, ""); err != nil {
		r.cancel(err)
		return
	}
	r.latest.Store(&snapshot{data: data, sum: sum})
	r.poke()
}

// snapshot is a state read, ready for the bucket.
type snapshot struct {
	data []byte
	sum  summary
}

// commitVerified commits the steps verified since the last commit (and, at
// the start, the branch itself). final, when not "", commits whatever the
// workspace holds with that message: the run's end.
func (r *runner) commitVerified(ctx context.Context, sum summary, final string) error {
	fresh := freshlyVerified(r.verified, sum.verified)
	if len(fresh) == 0 && r.begun && final == "" {
		return nil
	}
	msg := final
	if msg == "" {
		msg = commitMessage(r.job.Run, fresh, sum)
	}
	if _, err := r.co.commit(ctx, r.w.opt.Name, msg); err != nil {
		return &pushError{fmt.Errorf("commit: %w", err)}
	}
	r.verified, r.begun = sum.verified, true
	return nil
}

// mirrorLoop pushes the commits and writes each new state to the bucket, and
// hands the run's commands to the engine once its sidecar is ready, until
// the engine ends. A write that loses the lease, or a push refused, ends the
// run.
func (r *runner) mirrorLoop(ctx context.Context, controls <-chan controlEntry, ready <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		// nil until the sidecar holds the workspace: a command made while it
		// starts would take the workspace from it.
		var live <-chan controlEntry
		for {
			select {
			case <-ready:
				live, ready = controls, nil
			case <-r.mirrorEnd:
				return
			case <-r.pokes:
				if err := r.mirror(ctx); err != nil {
					if errors.Is(err, ErrLeaseLost) || errors.As(err, new(*pushError)) {
						r.cancel(err)
						return
					}
					r.log.Warn("state not mirrored: written again at the next change or renewal", "err", err)
				}
			case c, ok := <-live:
				if !ok {
					live, controls = nil, nil
					continue
				}
				if r.control(ctx, c) {
					r.removeCommand(ctx, c)
				}
			}
		}
	}()
	return done
}

// mirror pushes what is committed, then writes the newest state the engine
// wrote to the run's record.
func (r *runner) mirror(ctx context.Context) error {
	r.retryRemovals(ctx)
	snap := r.latest.Load()
	if snap == nil || bytes.Equal(snap.data, r.mirrored) {
		return nil
	}
	if r.l.expiring() {
		return fmt.Errorf("%w: not pushing on a lease half gone", ErrLeaseLost)
	}
	sha, err := r.co.push(ctx)
	if err != nil {
		return &pushError{err}
	}
	state := snap.data
	if len(state) > r.maxState() {
		state = nil // the branch's state.json stands in for it
	}
	err = r.l.update(ctx, func(rec *Record) {
		if r.budgetMade {
			rec.Budget = nil
		}
		rec.State, rec.Spend, rec.Commit = state, snap.sum.spend, sha
		rec.Step, rec.Phase, rec.Done, rec.Steps = snap.sum.step, snap.sum.phase, snap.sum.done, snap.sum.steps
	})
	if err != nil {
		return err
	}
	r.mirrored = snap.data
	if state != nil {
		r.removeHanded(ctx, snap.sum.applied)
	}
	return nil
}

// maxState is the largest state the record carries: what a message holds,
// less room for the rest of the record.
func (r *runner) maxState() int {
	return int(r.w.c.NC.MaxPayload()) - 64<<10
}

// settle reads the state once more, commits (with final as the commit's
// message, "" for verified steps only), pushes and mirrors it: the start and
// the end of a run, with the engine not running.
func (r *runner) settle(ctx context.Context, final string) error {
	data, err := r.e.readState()
	if err != nil {
		return fmt.Errorf("read the state: %w", err)
	}
	sum, err := summarize(data)
	if err != nil {
		return err
	}
	if err := r.commitVerified(ctx, sum, final); err != nil {
		return err
	}
	r.seen = data
	r.latest.Store(&snapshot{data: data, sum: sum})
	if final != "" {
		r.mirrored = nil // the end is written even when the state is not new
	}
	return r.mirror(ctx)
}

// freshlyVerified are the steps DONE now that were not, or that ran again.
func freshlyVerified(before, now map[string]string) []string {
	var out []string
	for id, at := range now {
		if was, ok := before[id]; !ok || was != at {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

func commitMessage(run string, fresh []string, sum summary) string {
	if len(fresh) == 0 {
		return fmt.Sprintf("stepseq %s: started (%d steps)", run, sum.steps)
	}
	return fmt.Sprintf("stepseq %s: %s verified (%d of %d steps done)", run, strings.Join(fresh, ", "), sum.done, sum.steps)
}

// finish says how the run ended: in the record (the lease's last write), on
// the branch, and to the queue.
func (r *runner) finish(runErr, cause error) {
	ctx, cancel := context.WithTimeout(context.Background(), r.w.opt.Lease/2)
	defer cancel()
	if errors.Is(cause, ErrLeaseLost) {
		r.log.Warn("lease lost: the agent is stopped and the run left to its new holder", "err", cause)
		if r.dir != "" {
			_ = os.RemoveAll(r.dir)
		}
		return
	}
	if errors.Is(cause, errShutdown) {
		r.handBack(ctx)
		return
	}
	status, reason, note := StatusDone, "", "done"
	switch {
	case errors.Is(cause, errClosed):
		status, reason, note = StatusClosed, "closed by "+r.closedBy, "closed"
	case cause != nil:
		status, reason, note = StatusBlocked, cause.Error(), "blocked"
	case isBlocked(runErr):
		status, reason, note = StatusBlocked, strings.TrimPrefix(runErr.Error(), errBlocked.Error()+": "), "blocked"
	case runErr != nil:
		status, reason, note = StatusBlocked, runErr.Error(), "blocked"
	}
	if r.co != nil && r.e != nil {
		if err := r.settle(ctx, fmt.Sprintf("stepseq %s: %s", r.job.Run, note)); err != nil {
			if errors.Is(err, ErrLeaseLost) {
				r.log.Warn("lease lost at the run's end", "err", err)
				return
			}
			if status != StatusBlocked {
				status, reason = StatusBlocked, err.Error()
			}
		}
	}
	err := r.l.update(ctx, func(rec *Record) { rec.Status, rec.Reason = status, reason })
	if err != nil {
		// Unacked, the run comes back to a worker, which finds it as this
		// one left it.
		r.log.Error("the run's end not recorded: it will be taken again", "status", status, "err", err)
		return
	}
	if err := r.msg.DoubleAck(ctx); err != nil {
		r.log.Warn("the run's message not acked: a worker taking it again finds it over", "err", err)
	}
	r.dropCommands(ctx, status)
	r.log.Info("run over", "status", status, "reason", reason)
	if status != StatusBlocked && r.dir != "" {
		// The branch holds the run; a blocked run's workspace keeps its logs.
		_ = os.RemoveAll(r.dir)
	}
}

// handBack gives the run back to the queue as the worker stops: the newest
// state in the record, the verified steps on the branch, and the message
// redelivered to another worker at once.
func (r *runner) handBack(ctx context.Context) {
	if r.co != nil && r.e != nil {
		if err := r.settle(ctx, ""); err != nil {
			r.log.Warn("the newest state not mirrored before handing the run back", "err", err)
		}
	}
	if err := r.l.update(ctx, func(rec *Record) { rec.Status, rec.Worker = StatusQueued, "" }); err != nil {
		r.log.Warn("the run's record not handed back", "err", err)
	}
	if err := r.msg.Nak(); err != nil {
		r.log.Warn("the run not handed back: it returns to the queue once its lease runs out", "err", err)
	}
	if r.dir != "" {
		_ = os.RemoveAll(r.dir)
	}
	r.log.Info("run handed back to the queue")
}

// watchControl delivers the commands stepseq close, retry, approve, reject
// and budget leave for the run, one at a time in the order given: those
// waiting first (a wildcard watch gives the keys' values, then their
// changes), an older version's single command before them, then an entry
// that says they are all delivered. The channel is closed once the watch
// ends.
func (r *runner) watchControl(ctx context.Context) <-chan controlEntry {
	kw, err := r.w.c.KV.Watch(ctx, ControlKeys(r.job.Run), jetstream.IgnoreDeletes())
	if err != nil {
		r.log.Warn("commands for the run not watched: close and retry reach it only through its record", "err", err)
		return nil
	}
	out := make(chan controlEntry)
	go func() {
		defer close(out)
		defer kw.Stop()
		if !r.sendLegacyControl(ctx, out) {
			return
		}
		for {
			select {
			case <-ctx.Done():
				return
			case en, ok := <-kw.Updates():
				if !ok {
					return
				}
				if !r.sendControl(ctx, out, en) {
					return
				}
			}
		}
	}()
	return out
}

type controlEntry struct {
	Control
	key string
	rev uint64
	// caughtUp: the commands that waited when the watch began are all
	// delivered; this entry is none.
	caughtUp bool
}

// control acts on a command once: close stops the run; retry queues a new
// try; an answer goes to a gate; a budget change to the engine. It reports
// whether the command's key is to leave the bucket now: a close's goes with
// the run's other commands once the run is recorded closed, a command that
// comes as the run ends waits for its next holder, or ends with it, and one
// handed to the engine under its id leaves once a state mirrored lists it
// (handed). One whose id the run's state lists already was applied: it
// leaves, not acted on again.
func (r *runner) control(ctx context.Context, c controlEntry) bool {
	if c.caughtUp || ctx.Err() != nil || r.acted[c.key] {
		return false
	}
	r.acted[c.key] = true
	if c.Close {
		r.closedBy = orWord(c.By, "stepseq close")
		r.log.Info("closing the run", "by", r.closedBy)
		r.cancel(errClosed)
		return false
	}
	id := commandOf(r.job.Run, c.key)
	if id != "" && slices.Contains(r.applied, id) {
		r.log.Info("a command the run's state holds applied: not acted on again", "command", c.Control.String(), "id", id)
		return true
	}
	handed := false
	if c.Retry != "" {
		if said, err := r.e.retry(c.Retry, id); err != nil {
			r.log.Warn("retry refused", "step", c.Retry, "err", err)
		} else {
			r.log.Info(said, "by", c.By)
			handed = true
		}
	}
	if c.Answer != nil {
		if said, err := r.e.answer(*c.Answer, c.By, id); err != nil {
			r.log.Warn("answer refused", "step", c.Answer.Step, "err", err)
		} else {
			r.log.Info(said, "by", c.By)
			handed = true
		}
	}
	if c.Budget != nil {
		handed = r.budget(*c.Budget, id) || handed
	}
	if handed && id != "" {
		r.handed = append(r.handed, c)
		return false
	}
	return true
}

// makeBudget gives the engine, before the run goes on, the budget changes
// its record kept while no worker held it.
func (r *runner) makeBudget(orders []BudgetOrder) {
	for _, o := range orders {
		r.budget(o, "")
	}
	r.budgetMade = len(orders) > 0
}

// budget gives the engine a change to the run's budget, under id when not
// "", and reports whether the engine took it; one it refuses is said in the
// log.
func (r *runner) budget(o BudgetOrder, id string) bool {
	said, err := r.e.budget(o, id)
	if err != nil {
		r.log.Warn("budget change refused", "step", o.Step, "changes", strings.Join(o.Changes, ","), "err", err)
		return false
	}
	r.log.Info(said, "by", o.By)
	return true
}

func orWord(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

// lowDisk is the free space under which a failed clone or commit is said to be
// the workdir's fullness: git's own word for it may be a signal (a write to
// a mapped file on a full tmpfs is a SIGBUS).
const lowDisk = 1 << 20

// withDiskNote adds to err that the workdir is full, when it is.
func withDiskNote(err error, workdir string) error {
	if free, ok := diskFree(workdir); ok && free < lowDisk {
		return fmt.Errorf("%w (the workdir %s is full: %d KiB free)", err, workdir, free>>10)
	}
	return err
}
