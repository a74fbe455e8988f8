package engine

import (
	"context"
	"path"
	"path/filepath"
	"slices"

	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/watcher"
)

// One sidecar drives every run of its workspace (ARCHITECTURE.md, engine):
// state.json, the main run, where the plans dropped in plans/ go one at a
// time, and each state.NAME.json beside it, started by `stepseq start` or
// written by hand. Each is a Run with a machine and a driver of its own, taken
// the same way; they share the loop, the watcher (the union of their watch
// sets) and --max-agents; a run's malformed file, failure or block stays its own.

// DefaultMaxAgents bounds the agents a sidecar launches at once, across its
// runs (--max-agents).
const DefaultMaxAgents = 4

// sidecarRuns is the Sidecar's part that holds its runs and the channels by
// which what happens to them comes back to the loop.
type sidecarRuns struct {
	ctx        context.Context
	runs       map[string]*Run // by name; the main run's is store.MainRun
	runExits   chan runExit
	runTimers  chan *Run
	runInherit chan *Run
	drains     chan runDrained
	draining   int           // drains in flight, across the runs
	loopDone   chan struct{} // closed when the loop has ended: forwarders give up
	waiting    []*driver     // tries held back by --max-agents, in the order they came
	// holdLaunches holds every launch back while the runs found at the start
	// are first read: an agent an earlier stepseq left in a run read later
	// counts against --max-agents before a new one starts in a run read
	// earlier.
	holdLaunches bool
	union        watchUnion
	// holdWatch: the union changes without the watcher until flushWatch, so
	// that taking up a thousand runs is one update of the watcher.
	holdWatch  bool
	watchDirty bool
	// armings counts the changes armUnion made to the watcher: a run taken
	// up that changed it asked for watches it did not have when it read.
	armings int
}

func (s *Sidecar) initRuns() {
	s.ctx = context.Background()
	s.runs = map[string]*Run{}
	s.runExits = make(chan runExit)
	s.runTimers = make(chan *Run, 64)
	s.runInherit = make(chan *Run, 8)
	s.drains = make(chan runDrained)
	s.loopDone = make(chan struct{})
	s.union = newWatchUnion()
	if s.opt.MaxAgents == 0 {
		s.opt.MaxAgents = DefaultMaxAgents
	}
	// The folder's entries (".") tell of run files that appear.
	s.union.set(rootOwner, []string{"."}, nil)
}

// rootOwner is the union's name for the sidecar's watch on the folder's
// entries, where run files appear; a run's part is under its name.
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
	if s.holdWatch && s.w != nil {
		s.watchDirty = s.watchDirty || len(added) > 0 || len(removed) > 0 || treesChanged
		return nil
	}
	if len(added) > 0 || len(removed) > 0 || treesChanged {
		s.armings++
	}
	if s.w == nil {
		allPaths, allTrees := s.union.all()
		cfg := s.wcfg
		cfg.Root, cfg.Paths, cfg.Trees = s.WS.Dir, allPaths, allTrees
		w, err := watcher.New(cfg)
		if err != nil {
			return err
		}
		s.w = w
		return nil
	}
	if treesChanged {
		return s.w.Update(s.union.all())
	}
	if len(added) == 0 && len(removed) == 0 {
		return nil
	}
	return s.w.Adjust(added, removed)
}

// admit says whether an agent may start now: fewer than --max-agents run
// across the runs (pulled steps launch no process and do not count), and if
// not why, for the journal. A try refused waits its turn, in the order the
// tries came.
func (s *Sidecar) admit(d *driver) (ok bool, why string) {
	if s.opt.MaxAgents < 0 {
		return true, ""
	}
	if s.holdLaunches {
		// Let go within the start's turn, before any wait: nothing to journal.
		s.waiting = append(s.waiting, d)
		return false, ""
	}
	if s.liveAgents() < s.opt.MaxAgents && len(s.waiting) == 0 {
		return true, ""
	}
	s.waiting = append(s.waiting, d)
	return false, overMaxAgents
}

// overMaxAgents is why a try held back by --max-agents waits, in the journal.
const overMaxAgents = "max agents running"

// releaseLaunches lets the tries held back while the runs found at the start
// were first read go, as far as --max-agents allows: by then every agent an
// earlier stepseq left running in any of those runs is counted. Those that
// still wait are journaled as waiting then.
func (s *Sidecar) releaseLaunches() {
	s.holdLaunches = false
	s.startWaiting()
	s.countAgents()
	journaled := map[*driver]bool{}
	for _, d := range s.waiting {
		if !journaled[d] {
			journaled[d] = true
			d.journalWaiting(overMaxAgents)
		}
	}
}

// liveAgents counts the agent processes running for every run, those an
// earlier stepseq left and the run's driver waits for among them.
func (s *Sidecar) liveAgents() int {
	n := 0
	count := func(d *driver) {
		if d.active != nil && d.active.tryLock != nil {
			n++
		}
		n += d.liveLanes() + d.inheritedAgents()
	}
	for _, r := range s.runs {
		count(r.d)
	}
	return n
}

// countAgents sets the running-agents gauge: at each try's start and end, and
// after each turn for what ends a run's agents otherwise (a run dropped).
func (s *Sidecar) countAgents() {
	if s.opt.Metrics != nil {
		s.opt.Metrics.runningAgents(s.liveAgents())
	}
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
func (s *Sidecar) discoverRuns() map[*Run]bool {
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
	fresh = s.unheldRuns(fresh)
	files := store.PrereadStates(s.WS, fresh)
	fresh, files = s.withoutCopies(fresh, files)
	// Each run's watches, from its state as preread, are armed before its
	// machine first reads the file (watch before read): a change after the
	// arming sends an event, and one before it is in what the machine reads
	// and decides on. The thousand runs' watches are one update of the watcher.
	s.holdWatch = true
	var added []*Run
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
		if err := s.w.Update(s.union.all()); err != nil {
			s.Logger.Error("updating watches", "err", err)
		}
	}
	// A run whose machine asked for watches beyond those armed ahead (its
	// state changed since the preread, or was not read) looks again once they
	// are armed, as a rescan does: what changed before the arming sent no event.
	taken := make(map[*Run]bool, len(added))
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

// withoutCopies leaves out the run files that are copies of another run (a
// backup, cp state.json state.orig.json): their state carries that run's id,
// and driving them would launch its agents a second time. Each is told once.
func (s *Sidecar) withoutCopies(names []string, files []*store.StateFile) ([]string, []*store.StateFile) {
	keptNames, keptFiles := names[:0:0], files[:0:0]
	for i, name := range names {
		st := files[i].PrereadState()
		if st == nil || st.CopyOf(name) == "" {
			keptNames, keptFiles = append(keptNames, name), append(keptFiles, files[i])
			continue
		}
		if s.copiesTold == nil {
			s.copiesTold = map[string]bool{}
		}
		if !s.copiesTold[name] {
			s.copiesTold[name] = true
			s.Logger.Warn("a copy of another run is not driven", "file", filepath.Base(files[i].Path), "copyOf", st.CopyOf(name),
				"fix", "to run it as a run of its own: stepseq start --from "+filepath.Base(files[i].Path))
		}
	}
	return keptNames, keptFiles
}
