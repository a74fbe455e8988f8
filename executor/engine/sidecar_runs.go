package engine

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/watcher"
)

// One sidecar drives every run of its workspace (DESIGN §14): state.json, whose
// driver is the Sidecar's own (plans dropped in plans/ go there, one at a
// time), and each state.NAME.json beside it, started by `stepseq start` or
// Written by hand, each with a machine and a driver of its own. They share the
// loop, the watcher (the union of their watch sets) and --max-agents; a run's
// malformed file, failure or block stays its own.

// DefaultMaxAgents bounds the agents a sidecar launches at once, across its
// runs (--max-agents).
const DefaultMaxAgents = 4

// drivenRun is one run beside the workspace's own.
type drivenRun struct {
	name    string
	d       *driver
	closing bool // close asked: archived once its agent is gone
}

// runExit is the end of a run's agent, forwarded to the loop.
type runExit struct {
	r    *drivenRun
	run  proc.Started
	exit core.Exit
}

// sidecarRuns is the Sidecar's part that holds the other runs.
type sidecarRuns struct {
	runs       map[string]*drivenRun
	runExits   chan runExit
	runTimers  chan *drivenRun
	runInherit chan *drivenRun
	loopDone   chan struct{} // closed when the loop has ended: forwarders give up
	waiting    []*driver     // tries held back by --max-agents, in the order they came
	union      watchUnion
	// holdWatch: the union changes without the watcher until flushWatch, so
	// that taking up a thousand runs is one update of the watcher.
	holdWatch  bool
	watchDirty bool
	// armings counts the changes armUnion made to the watcher: a run taken
	// up that changed it asked for watches it did not have when it read.
	armings int
}

func (s *Sidecar) initRuns() {
	s.runs = map[string]*drivenRun{}
	s.runExits = make(chan runExit)
	s.runTimers = make(chan *drivenRun, 64)
	s.runInherit = make(chan *drivenRun, 8)
	s.loopDone = make(chan struct{})
	s.d.toLoop = func(f func()) {
		select {
		case s.calls <- f:
		case <-s.loopDone:
		}
	}
	s.union = newWatchUnion()
	if s.opt.MaxAgents == 0 {
		s.opt.MaxAgents = DefaultMaxAgents
	}
	// The workspace's own run: its watch set joins the union; the folder's
	// entries (".") tell of run files that appear.
	closeReq := s.rel(s.WS.CloseRequestPath())
	s.d.watchTo = func(w core.SetWatch) error {
		if w.Delta {
			return s.adjustFor("", w.Added, without(w.Removed, closeReq))
		}
		return s.watchFor("", append(slices.Clone(w.Paths), closeReq), w.Trees)
	}
	s.d.admit = s.admit
	s.union.set(rootOwner, []string{"."}, nil)
}

// mainBatch is the batch as the workspace's own run sees it: without the
// folder's entries that only the watch for run files brought.
func (s *Sidecar) mainBatch(b watcher.Batch) watcher.Batch {
	out := watcher.Batch{Rescan: b.Rescan, Paths: b.Paths[:0:0]}
	for _, p := range b.Paths {
		if !strings.Contains(p, "/") && !slices.Contains(s.union.ownersOf(p), "") {
			continue
		}
		out.Paths = append(out.Paths, p)
	}
	if len(out.Paths) == len(b.Paths) {
		return b
	}
	return out
}

// rootOwner is the union's name for the sidecar's watch on the folder's
// entries, where run files appear; the workspace's own run is "".
const rootOwner = "\x00root"

// watchFor sets run's part of the union, and arms the watcher with the union.
func (s *Sidecar) watchFor(run string, paths, trees []string) error {
	added, removed, treesChanged := s.union.set(run, paths, trees)
	return s.armUnion(added, removed, treesChanged)
}

// adjustFor changes run's part of the union by what its paths gained and
// lost, and arms the watcher with the union.
func (s *Sidecar) adjustFor(run string, gained, lost []string) error {
	added, removed := s.union.adjust(run, gained, lost)
	return s.armUnion(added, removed, false)
}

// without is list less the names given, list itself when it holds none.
func without(list []string, names ...string) []string {
	if !slices.ContainsFunc(list, func(p string) bool { return slices.Contains(names, p) }) {
		return list
	}
	return slices.DeleteFunc(slices.Clone(list), func(p string) bool { return slices.Contains(names, p) })
}

// armUnion arms the watcher with the union after it gained added, lost
// removed, and its trees changed or not.
func (s *Sidecar) armUnion(added, removed []string, treesChanged bool) error {
	if s.holdWatch && s.d.w != nil {
		s.watchDirty = s.watchDirty || len(added) > 0 || len(removed) > 0 || treesChanged
		return nil
	}
	if len(added) > 0 || len(removed) > 0 || treesChanged {
		s.armings++
	}
	if s.d.w == nil {
		allPaths, allTrees := s.union.all()
		cfg := s.d.wcfg
		cfg.Root, cfg.Paths, cfg.Trees = s.WS.Dir, allPaths, allTrees
		w, err := watcher.New(cfg)
		if err != nil {
			return err
		}
		s.d.w = w
		return nil
	}
	if treesChanged {
		return s.d.w.Update(s.union.all())
	}
	if len(added) == 0 && len(removed) == 0 {
		return nil
	}
	return s.d.w.Adjust(added, removed)
}

// admit says whether an agent may start now: fewer than --max-agents run
// across the runs (pulled steps launch no process and do not count). A try
// refused waits its turn, in the order the tries came.
func (s *Sidecar) admit(d *driver) bool {
	if s.opt.MaxAgents < 0 || s.liveAgents() < s.opt.MaxAgents && len(s.waiting) == 0 {
		return true
	}
	s.waiting = append(s.waiting, d)
	return false
}

// liveAgents counts the agent processes running for every run.
func (s *Sidecar) liveAgents() int {
	n := 0
	count := func(d *driver) {
		if d.active != nil && d.active.tryLock != nil {
			n++
		}
		n += d.liveLanes()
	}
	count(s.d)
	for _, r := range s.runs {
		count(r.d)
	}
	return n
}

// startWaiting starts the tries held back, oldest first, while agents may.
func (s *Sidecar) startWaiting() {
	for len(s.waiting) > 0 && (s.opt.MaxAgents < 0 || s.liveAgents() < s.opt.MaxAgents) {
		d := s.waiting[0]
		s.waiting = s.waiting[1:]
		l := d.takeWaiting()
		if l == nil {
			continue // stopped while it waited
		}
		admit := d.admit
		d.admit = nil // its turn has come
		d.start(*l)
		d.admit = admit
	}
}

// discoverRuns takes up every run file in the folder not driven yet, and
// returns the runs it took up: each has had its rescan, its watches armed.
func (s *Sidecar) discoverRuns() map[*drivenRun]bool {
	names, err := store.RunNames(s.WS.ForRun(store.MainRun))
	if err != nil {
		s.Logger.Warn("listing runs", "err", err)
		return nil
	}
	var fresh []string
	for _, name := range names {
		if name != store.MainRun && s.runs[name] == nil {
			fresh = append(fresh, name)
		}
	}
	files := store.PrereadStates(s.WS, fresh)
	// Each run's watches, from its state as preread, are armed before its
	// machine first reads the file (watch before read): a change after the
	// arming sends an event, and one before it is in what the machine reads
	// and decides on. The thousand runs' watches are one update of the watcher.
	s.holdWatch = true
	var added []*drivenRun
	for i, name := range fresh {
		if s.runs[name] == nil {
			r := s.newRun(name, files[i])
			r.d.watchAhead(files[i].PrereadState())
			added = append(added, r)
		}
	}
	s.holdWatch = false
	if s.watchDirty {
		s.watchDirty = false
		if err := s.d.w.Update(s.union.all()); err != nil {
			s.Logger.Error("updating watches", "err", err)
		}
	}
	// A run whose machine asked for watches beyond those armed ahead (its
	// state changed since the preread, or was not read) looks again once they
	// are armed, as a rescan does: what changed before the arming sent no event.
	taken := make(map[*drivenRun]bool, len(added))
	for _, r := range added {
		taken[r] = true
		armings := s.armings
		s.takeUp(r)
		if s.runs[r.name] == r && !r.closing && s.armings != armings {
			s.passRun(r, watcher.Batch{Rescan: true})
		}
	}
	return taken
}

// addRun starts driving run name: its machine reads its state file.
func (s *Sidecar) addRun(name string) {
	s.takeUp(s.newRun(name, nil))
}

// newRun makes the driver of run name, whose state file is sf (nil: one not
// read yet), without reading it.
func (s *Sidecar) newRun(name string, sf *store.StateFile) *drivenRun {
	rw := s.WS.ForRun(name)
	if sf == nil {
		sf = &store.StateFile{Path: rw.State}
	}
	rt := &Runtime{WS: rw, Getenv: s.Getenv, Environ: s.Environ, Grace: s.Grace, PipeGrace: s.PipeGrace,
		Logger: s.Logger.With("run", name), Journal: &store.Journal{Path: rw.JournalPath()}, Now: s.Now, Allow: s.Allow, root: s.Root()}
	r := &drivenRun{name: name}
	d := newDriver(s.d.ctx, rt, sf, s.lock, s.d.m.Config())
	d.timer = time.AfterFunc(time.Hour, func() {
		select {
		case s.runTimers <- r:
		case <-s.loopDone:
		}
	})
	d.timer.Stop()
	d.metrics, d.notifier, d.onChange = s.opt.Metrics, s.opt.Notifier, s.opt.OnChange
	// A run's pulled steps are offered through its files (its state, reports
	// folder): the launcher dispatches them, and ends a try its done report ends.
	d.pull = NewPullLauncher(RunPullKey(s.d.pull.key, name))
	plans, closeReq := s.rel(s.opt.PlansDir), s.rel(rw.CloseRequestPath())
	d.watchTo = func(w core.SetWatch) error {
		if w.Delta {
			return s.adjustFor(name, without(w.Added, plans), without(w.Removed, plans, closeReq))
		}
		own := slices.DeleteFunc(slices.Clone(w.Paths), func(p string) bool { return p == plans })
		return s.watchFor(name, append(own, closeReq), w.Trees)
	}
	d.admit = s.admit
	d.sharedWatcher = func() *watcher.Watcher { return s.d.w }
	d.launched = func(run proc.Started) {
		go func() {
			e := <-run.Done()
			select {
			case s.runExits <- runExit{r: r, run: run, exit: e}:
			case <-s.loopDone:
			}
		}()
	}
	d.inheritedGone = func() {
		select {
		case s.runInherit <- r:
		case <-s.loopDone:
		}
	}
	r.d = d
	s.runs[name] = r
	return r
}

// takeUp has a run's machine read its state file and decide, then hands it
// the triggers queued for it; a run asked to close is closed instead.
func (s *Sidecar) takeUp(r *drivenRun) {
	rt := r.d.rt
	start := core.Entry{Event: "start", Detail: map[string]any{"pid": s.lock.Holder.PID, "state": rt.WS.State, "run": r.name}}
	if _, err := os.Lstat(rt.WS.CloseRequestPath()); err == nil {
		rt.record(start)
		s.closeRun(r)
		return
	}
	// Its first records (start, the state read, the decision, its watches)
	// go to its journal as one write.
	rt.Journal.Hold()
	defer func() {
		if err := rt.Journal.Flush(); err != nil {
			rt.Logger.Warn("journal not written", "err", err)
		}
	}()
	rt.record(start)
	// The machine arms a run's watches, its close request's with them, before
	// the first write that offers a step, so a close made on seeing the offer
	// sends an event.
	r.d.readState()
	if s.runs[r.name] == r && !r.closing {
		s.takeTriggers(r)
	}
	s.afterRun(r)
}

// takeTriggers drains a run's trigger folder and hands the machine what it held.
func (s *Sidecar) takeTriggers(r *drivenRun) {
	ts, errs := DrainTriggers(r.d.rt.WS)
	for _, err := range errs {
		r.d.rt.Logger.Warn("ignored a trigger", "err", err)
	}
	if len(ts) > 0 {
		r.d.feed(core.TriggersIn{Triggers: ts})
	}
}

// afterRun drops a run whose state file is gone with nothing in flight.
func (s *Sidecar) afterRun(r *drivenRun) {
	if s.runs[r.name] != r {
		return
	}
	m := r.d.m
	_ = m.TakeRemoved() // a run file removed by hand: nothing to keep beyond its journal
	if m.State() == nil && m.StateInvalid() == nil && !m.Busy() && r.d.active == nil && len(r.d.lanes) == 0 && r.d.waiting == nil {
		if _, err := os.Lstat(r.d.sf.Path); errors.Is(err, fs.ErrNotExist) {
			s.dropRun(r)
		}
	}
}

// dropRun stops driving a run: its watches go, its timer stops.
func (s *Sidecar) dropRun(r *drivenRun) {
	r.d.timer.Stop()
	r.d.endGroups()
	if err := s.watchFor(r.name, nil, nil); err != nil {
		s.Logger.Warn("updating watches", "err", err)
	}
	s.waiting = slices.DeleteFunc(s.waiting, func(d *driver) bool { return d == r.d })
	delete(s.runs, r.name)
	_ = r.d.rt.Journal.Close()
}

// closeRun carries out a close request (CloseRun): the run stops launching,
// its agent is stopped as at shutdown, and once it is gone the run is archived.
func (s *Sidecar) closeRun(r *drivenRun) {
	if r.closing {
		return
	}
	r.closing = true
	r.d.rt.Logger.Info("closing the run")
	r.d.feed(core.Shutdown{})
	r.d.waiting, r.d.laneWait = nil, nil
	if a := r.d.active; a != nil {
		a.stopped = true
		a.run.Stop()
		return // archived once its exit comes
	}
	if len(r.d.lanes) > 0 {
		for _, a := range r.d.lanes {
			a.stopped = true
			a.run.Stop()
		}
		return // archived once the last exit comes
	}
	s.archiveClosed(r)
}

// archiveClosed archives a closed run whose agent is gone, and drops it.
func (s *Sidecar) archiveClosed(r *drivenRun) {
	r.d.endGroups()
	r.d.sweepWorktrees(nil)
	switch err := r.d.rt.WS.ArchiveClosed(); {
	case errors.Is(err, fs.ErrNotExist):
		// Its state file was removed by hand: nothing to archive, and the
		// request is answered (CloseRun waits for it to go).
		_ = os.Remove(r.d.rt.WS.CloseRequestPath())
	case err != nil:
		r.d.rt.Logger.Error("the closed run could not be archived", "err", err)
	}
	s.dropRun(r)
}

// closeMain closes the workspace's own run: its state goes to the history and
// state.json is removed; its agent, if one runs, is stopped. The machine then
// reads the state gone, and a plan waiting in plans/ may start.
func (s *Sidecar) closeMain() {
	if _, err := os.Lstat(s.WS.State); err != nil {
		_ = os.Remove(s.WS.CloseRequestPath())
		return
	}
	s.Logger.Info("closing the workspace's own run")
	if a := s.d.active; a != nil && !a.stopped {
		a.stopped = true
		a.run.Stop()
	}
	for _, a := range s.d.lanes {
		if !a.stopped {
			a.stopped = true
			a.run.Stop()
		}
	}
	s.d.sweepWorktrees(nil)
	if err := s.WS.ArchiveClosed(); err != nil {
		s.Logger.Error("the closed run could not be archived", "err", err)
		return
	}
	s.d.readState()
	_ = s.d.m.TakeRemoved() // archived already: the history holds it once
}

// runExited takes the end of a run's agent.
func (s *Sidecar) runExited(ev runExit) {
	r := ev.r
	if s.runs[r.name] != r || !r.d.finishRun(ev.run, ev.exit) {
		return
	}
	if r.closing && r.d.active == nil && len(r.d.lanes) == 0 {
		s.archiveClosed(r)
		return
	}
	s.afterRun(r)
}

// passRuns hands one watcher batch to the runs it concerns: each run's state
// file, triggers, close request, reports and named paths. A run file that
// appears is a new run.
func (s *Sidecar) passRuns(b watcher.Batch) {
	var taken map[*drivenRun]bool
	if b.Rescan {
		taken = s.discoverRuns()
	}
	for _, p := range b.Paths {
		if !strings.Contains(p, "/") {
			if name := store.RunOfStateFile(p); name != "" && s.runs[name] == nil {
				if _, err := os.Lstat(store.RunStatePath(s.WS.Dir, name)); err == nil {
					s.addRun(name)
				}
			}
		}
		if p == s.rel(s.WS.CloseRequestPath()) {
			if _, err := os.Lstat(s.WS.CloseRequestPath()); err == nil {
				s.closeMain()
			}
		}
	}
	per := map[*drivenRun][]string{}
	for _, p := range b.Paths {
		for _, name := range s.union.ownersOf(p) {
			if r := s.runs[name]; r != nil {
				per[r] = append(per[r], p)
			}
		}
	}
	if b.Rescan {
		for _, r := range s.runs {
			if _, ok := per[r]; !ok && !taken[r] {
				per[r] = nil
			}
		}
	}
	// In start order of names, so that a burst is taken the same way each time.
	order := make([]*drivenRun, 0, len(per))
	for r := range per {
		order = append(order, r)
	}
	slices.SortFunc(order, func(a, b *drivenRun) int { return strings.Compare(a.name, b.name) })
	for _, r := range order {
		s.passRun(r, watcher.Batch{Paths: per[r], Rescan: b.Rescan})
	}
}

// passRun is pass for one run beside the workspace's own: its state file, its
// close request and its triggers, then the change itself. Its triggers are
// drained at once: a run's trigger folder holds a few files.
func (s *Sidecar) passRun(r *drivenRun, b watcher.Batch) {
	if s.runs[r.name] != r {
		return
	}
	ws := r.d.rt.WS
	state, closeReq, triggers := s.rel(ws.State), s.rel(ws.CloseRequestPath()), s.rel(ws.TriggersDir())
	stateChanged, triggersChanged := b.Rescan, b.Rescan
	for _, p := range b.Paths {
		switch {
		case p == state:
			stateChanged = true
		case p == closeReq:
			if _, err := os.Lstat(ws.CloseRequestPath()); err == nil {
				s.closeRun(r)
				return
			}
		case under(p, triggers):
			triggersChanged = true
		}
	}
	if b.Rescan {
		if _, err := os.Lstat(ws.CloseRequestPath()); err == nil {
			s.closeRun(r)
			return
		}
	}
	if r.closing {
		return
	}
	if stateChanged {
		r.d.readState()
	}
	if triggersChanged {
		s.takeTriggers(r)
	}
	if len(b.Paths) > 0 || b.Rescan {
		r.d.batch(b)
	}
	s.afterRun(r)
}

// stopRuns ends every run's agent at shutdown and waits for them, as stopActive
// does for the workspace's own.
func (s *Sidecar) stopRuns() {
	live := 0
	for _, r := range s.runs {
		r.d.feed(core.Shutdown{})
		r.d.waiting, r.d.laneWait = nil, nil
		if a := r.d.active; a != nil {
			a.stopped = true
			a.run.Stop()
			live++
		}
		for _, a := range r.d.lanes {
			a.stopped = true
			a.run.Stop()
			live++
		}
	}
	for live > 0 {
		ev := <-s.runExits
		if s.runs[ev.r.name] == ev.r && ev.r.d.finishRun(ev.run, ev.exit) {
			live--
		}
	}
	for _, r := range s.runs {
		r.d.timer.Stop()
		r.d.endGroups()
		_ = r.d.rt.Journal.Close()
	}
}

// watchUnion is the sidecar's one watch set: the union of its runs' sets, each
// path with the runs that name it, so that a change reaches the runs it
// concerns and no other. A run's part changes whole (set) or by a delta
// (adjust): a step's report folder, in a plan naming 10,000 paths, costs a
// few map operations, not a walk of them all.
type watchUnion struct {
	parts  map[string]*watchPart      // run → its part
	owners map[string]map[string]bool // path → the runs naming it
	trees  map[string]map[string]bool // tree → the runs naming it
	// below counts, for each folder above a named path, the runs naming a path
	// under it: a folder made on the way to a named path concerns them.
	below map[string]map[string]int
}

// watchPart is one run's part of the union.
type watchPart struct {
	paths map[string]bool
	trees []string
}

func newWatchUnion() watchUnion {
	return watchUnion{parts: map[string]*watchPart{}, owners: map[string]map[string]bool{},
		trees: map[string]map[string]bool{}, below: map[string]map[string]int{}}
}

// set replaces run's part; it returns the paths the union gained and lost,
// sorted, and whether its trees changed.
func (u *watchUnion) set(run string, paths, trees []string) (added, removed []string, treesChanged bool) {
	part := u.part(run)
	next := setOf(paths)
	for p := range part.paths {
		if !next[p] {
			removed = u.lose(run, p, removed)
		}
	}
	for p := range next {
		if !part.paths[p] {
			added = u.gain(run, p, added)
		}
	}
	part.paths = next
	treesChanged = u.setTrees(run, part, trees)
	u.keep(run, part)
	slices.Sort(added)
	slices.Sort(removed)
	return added, removed, treesChanged
}

// adjust changes run's paths by what they gained and lost, its trees kept; it
// returns the paths the union gained and lost, sorted.
func (u *watchUnion) adjust(run string, gained, lost []string) (added, removed []string) {
	part := u.part(run)
	for _, p := range lost {
		if part.paths[p] {
			delete(part.paths, p)
			removed = u.lose(run, p, removed)
		}
	}
	for _, p := range gained {
		if !part.paths[p] {
			part.paths[p] = true
			added = u.gain(run, p, added)
		}
	}
	u.keep(run, part)
	slices.Sort(added)
	slices.Sort(removed)
	return added, removed
}

func (u *watchUnion) part(run string) *watchPart {
	if part := u.parts[run]; part != nil {
		return part
	}
	return &watchPart{paths: map[string]bool{}}
}

// keep holds run's part, or drops it when it names nothing.
func (u *watchUnion) keep(run string, part *watchPart) {
	if len(part.paths) == 0 && len(part.trees) == 0 {
		delete(u.parts, run)
		return
	}
	u.parts[run] = part
}

// gain makes run an owner of p, appending p to added when the union lacked it.
func (u *watchUnion) gain(run, p string, added []string) []string {
	if len(u.owners[p]) == 0 {
		added = append(added, p)
		u.owners[p] = map[string]bool{}
	}
	u.owners[p][run] = true
	for a := path.Dir(p); a != "." && a != "/"; a = path.Dir(a) {
		if u.below[a] == nil {
			u.below[a] = map[string]int{}
		}
		u.below[a][run]++
	}
	return added
}

// lose takes run off p's owners, appending p to removed when none is left.
func (u *watchUnion) lose(run, p string, removed []string) []string {
	delete(u.owners[p], run)
	if len(u.owners[p]) == 0 {
		delete(u.owners, p)
		removed = append(removed, p)
	}
	for a := path.Dir(p); a != "." && a != "/"; a = path.Dir(a) {
		if u.below[a][run]--; u.below[a][run] <= 0 {
			delete(u.below[a], run)
			if len(u.below[a]) == 0 {
				delete(u.below, a)
			}
		}
	}
	return removed
}

// setTrees replaces run's trees; it says whether the union's trees changed.
func (u *watchUnion) setTrees(run string, part *watchPart, trees []string) (changed bool) {
	oldTrees, newTrees := setOf(part.trees), setOf(trees)
	for t := range newTrees {
		if !oldTrees[t] {
			if len(u.trees[t]) == 0 {
				changed = true
				u.trees[t] = map[string]bool{}
			}
			u.trees[t][run] = true
		}
	}
	for t := range oldTrees {
		if !newTrees[t] {
			delete(u.trees[t], run)
			if len(u.trees[t]) == 0 {
				delete(u.trees, t)
				changed = true
			}
		}
	}
	part.trees = slices.Clone(trees)
	return changed
}

func setOf(list []string) map[string]bool {
	m := make(map[string]bool, len(list))
	for _, p := range list {
		m[p] = true
	}
	return m
}

// all is the union's paths and trees, sorted.
func (u *watchUnion) all() (paths, trees []string) {
	for p := range u.owners {
		paths = append(paths, p)
	}
	for t := range u.trees {
		trees = append(trees, t)
	}
	slices.Sort(paths)
	slices.Sort(trees)
	return paths, trees
}

// ownersOf lists the runs a changed path concerns: those naming it, its folder
// (a named folder's entries count) or a tree above it, and, for a folder made
// on the way to a named path, those naming a path below it.
func (u *watchUnion) ownersOf(p string) []string {
	var out []string
	add := func(m map[string]bool) {
		for run := range m {
			if !slices.Contains(out, run) {
				out = append(out, run)
			}
		}
	}
	add(u.owners[p])
	for a := p; a != "." && a != "/" && a != ""; {
		a = path.Dir(a)
		if a == path.Dir(p) {
			add(u.owners[a])
		}
		add(u.trees[a])
		if a == "." {
			add(u.trees[""])
			break
		}
	}
	for run := range u.below[p] {
		if !slices.Contains(out, run) {
			out = append(out, run)
		}
	}
	return out
}
