package watcher

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// errGone means a directory vanished before its watch was added: the event
// that removed it is on its way, so the caller just stops there.
var errGone = errors.New("directory gone")

// watchSet holds the directory watches that serve a scope. Only the watcher's
// loop goroutine (or New, before the loop starts) uses it.
//
// Directories are watched, never files: an editor that saves by rename
// replaces the inode, and a watch on the old one dies with it. For each path
// and tree root, every existing directory on the way from the root is
// watched, so that creating, removing or renaming any of them is seen; a
// tree root also has its whole subtree watched. The root itself is always
// watched; while it is missing, its nearest existing ancestor is, so its
// return is seen.
type watchSet struct {
	fsw   notifier
	root  string // absolute, clean
	scope scope
	// onPath counts, for each absolute directory at or below the root, the
	// anchors (the root, the paths, the tree roots) at or below it; above the
	// root are the root's ancestors.
	onPath    map[string]int
	aboveRoot map[string]struct{}
	held      map[string]struct{} // absolute directories with a watch
	grown     map[string]bool     // trees whose whole subtree is watched
	rootID    uint64              // the inode of the watched root
	report    func(error)         // a directory that cannot be watched or listed
}

func newWatchSet(fsw notifier, root string, sc scope, report func(error)) *watchSet {
	s := &watchSet{fsw: fsw, root: root, report: report,
		held: make(map[string]struct{}), grown: make(map[string]bool), aboveRoot: map[string]struct{}{}}
	for d := root; ; {
		up := filepath.Dir(d)
		if up == d {
			break
		}
		s.aboveRoot[up] = struct{}{}
		d = up
	}
	s.setScope(sc)
	return s
}

func (s *watchSet) setScope(sc scope) {
	for t := range s.grown {
		if !slices.Contains(sc.trees, t) {
			delete(s.grown, t)
		}
	}
	s.scope = sc
	s.onPath = make(map[string]int, 2*len(sc.paths)+2*len(sc.trees)+1)
	s.onPath[s.root] = 1
	for _, a := range sc.anchors() {
		s.countAnchor(a, 1)
	}
}

// shiftScope takes a scope whose trees are the current ones and whose paths
// differ by added and removed: only their directories are counted again.
func (s *watchSet) shiftScope(sc scope, added, removed []string) {
	s.scope = sc
	for _, list := range []struct {
		paths []string
		delta int
	}{{added, 1}, {removed, -1}} {
		for _, p := range list.paths {
			if _, isTree := slices.BinarySearch(sc.trees, p); !isTree {
				s.countAnchor(p, list.delta) // a tree root is counted as a tree
			}
		}
	}
}

// countAnchor adds delta to the count of the anchor rel and of every directory
// above it up to the root.
func (s *watchSet) countAnchor(rel string, delta int) {
	if rel == "" {
		return // the root counts once, for itself
	}
	for d := s.abs(rel); d != s.root; d = filepath.Dir(d) {
		if n := s.onPath[d] + delta; n > 0 {
			s.onPath[d] = n
		} else {
			delete(s.onPath, d)
		}
	}
}

func (s *watchSet) abs(rel string) string {
	if rel == "" {
		return s.root
	}
	return filepath.Join(s.root, filepath.FromSlash(rel))
}

// rel maps an event's name to a workspace-relative path; ok is false for a
// name outside the workspace (an ancestor watched while the root is missing).
func (s *watchSet) rel(name string) (string, bool) {
	if name == s.root {
		return "", true
	}
	if !under(name, s.root) {
		return "", false
	}
	return filepath.ToSlash(strings.TrimPrefix(name[len(s.root):], string(filepath.Separator))), true
}

func (s *watchSet) holds(dir string) bool {
	_, ok := s.held[dir]
	return ok
}

// onAnchorPath reports whether name is the root, one of its ancestors, or a
// directory on the way to a path or tree root (or one of those itself):
// creating, removing or renaming it changes which directories need a watch.
func (s *watchSet) onAnchorPath(name string) bool {
	if s.onPath[name] > 0 {
		return true
	}
	_, ok := s.aboveRoot[name]
	return ok
}

// rearmUnder makes the watches match the scope for the paths and tree roots
// at or below rel, a directory on the way to one of them that came or went:
// the rest of the watch set is not looked at, so that a file appearing among
// 2,000 named ones costs what it touches. Everything a new watch finds is
// emitted. The caller has dropped the watches of a directory that went.
func (s *watchSet) rearmUnder(rel string, emit func(string)) error {
	for _, p := range s.scope.at(s.scope.paths, rel) {
		if _, err := s.chain(p, nil, emit); err != nil {
			return err
		}
	}
	for _, t := range s.scope.at(s.scope.trees, rel) {
		if err := s.armTree(t, nil, emit); err != nil {
			return err
		}
	}
	return nil
}

// updatePaths makes the watches match a scope (set by shiftScope) whose trees
// are those of the last reconcile and whose paths changed by added and removed:
// the chains of the paths added are watched, and the watches only the paths
// removed needed are dropped. What the other paths need is as it was: file events keep it so.
func (s *watchSet) updatePaths(added, removed []string) error {
	for _, p := range added {
		if _, err := s.chain(p, nil, nil); err != nil {
			return err
		}
	}
	for _, p := range removed {
		for dir := s.abs(p); dir != s.root && under(dir, s.root); dir = filepath.Dir(dir) {
			if !s.holds(dir) || s.onAnchorPath(dir) {
				continue
			}
			if rel, ok := s.rel(dir); ok {
				if _, inTree := s.scope.tree(rel); inTree {
					continue
				}
			}
			s.unwatch(dir)
		}
	}
	return nil
}

// SortedDiff returns the elements of the sorted list a that the sorted list b
// lacks, in order.
func SortedDiff(a, b []string) []string {
	var out []string
	j := 0
	for _, x := range a {
		for j < len(b) && b[j] < x {
			j++
		}
		if j == len(b) || b[j] != x {
			out = append(out, x)
		}
	}
	return out
}

// reconcile makes the held watches match the scope: it watches what exists
// and is needed, and drops the rest. A directory watched for the first time
// is listed after its watch is in place, and with emit, every entry found is
// reported, so that a file made in a directory created a moment earlier is not
// missed. rearmed reports that the root got a new watch (the first, or after
// it was lost): then nothing is emitted, since the caller rescans anyway.
// Only an inotify limit is returned (and then nothing is dropped); other
// failures go to report.
func (s *watchSet) reconcile(emit func(rel string)) (rearmed bool, err error) {
	want := make(map[string]struct{}, len(s.held)+len(s.onPath))
	ok, rearmed, err := s.armRoot(want)
	if err != nil {
		return rearmed, err
	}
	if ok {
		if rearmed {
			emit = nil
		}
		if err := s.arm(want, emit); err != nil {
			return rearmed, err
		}
	}
	s.sweep(want)
	return rearmed, nil
}

// arm watches the chains to the paths and tree roots, and the trees that
// were not watched yet.
func (s *watchSet) arm(want map[string]struct{}, emit func(string)) error {
	for _, p := range s.scope.paths {
		if _, err := s.chain(p, want, emit); err != nil {
			return err
		}
	}
	for _, t := range s.scope.trees {
		if err := s.armTree(t, want, emit); err != nil {
			return err
		}
	}
	return nil
}

// armTree watches the chain down to the tree t and, once t itself is watched,
// every directory below it, the first time only.
func (s *watchSet) armTree(t string, want map[string]struct{}, emit func(string)) error {
	got, err := s.chain(t, want, emit)
	if err != nil || got != t || s.grown[t] {
		return err
	}
	if err := s.grow(t, t, emit); err != nil {
		return err
	}
	s.grown[t] = true
	return nil
}

// armRoot watches the root and reports true, or, while the root is missing,
// watches its nearest existing ancestor and reports false. added reports a
// new watch on the root. A root found missing or replaced (another inode)
// loses its watches at once: fsnotify does not always say the old one died.
func (s *watchSet) armRoot(want map[string]struct{}) (ok, added bool, err error) {
	// An ancestor watched in a round that then found a directory nearer the
	// root is not wanted: it is swept, not kept beside the root's own watch.
	var stand string
	for range 100 { // each round, a directory on the way appeared meanwhile
		dir := nearestDir(s.root)
		if s.holds(s.root) && (dir != s.root || inodeOf(s.root) != s.rootID) {
			s.drop(s.root)
		}
		added, err := s.watch(dir)
		if errors.Is(err, errGone) {
			continue
		} else if err != nil {
			return false, false, err
		}
		if dir == s.root {
			want[dir] = struct{}{}
			if added {
				s.rootID = inodeOf(s.root)
			}
			return true, added, nil
		}
		stand = dir
		if nearestDir(s.root) == dir {
			break
		}
	}
	if stand != "" {
		want[stand] = struct{}{}
	}
	return false, false, nil
}

// chain watches every existing directory from the root down to target, each
// before looking for the next one, and returns the deepest one reached. A
// target that is a file stops the chain at its parent. The directories go
// into want, unless it is nil.
func (s *watchSet) chain(target string, want map[string]struct{}, emit func(string)) (string, error) {
	cur := ""
	for rest := target; rest != ""; {
		var name string
		name, rest, _ = strings.Cut(rest, "/")
		next := join(cur, name)
		dir := s.abs(next)
		if !isDir(dir) {
			break
		}
		added, err := s.watch(dir)
		if errors.Is(err, errGone) {
			break
		} else if err != nil {
			return cur, err
		}
		if want != nil {
			want[dir] = struct{}{}
		}
		if added && emit != nil {
			s.list(next, func(e fs.DirEntry) { emit(join(next, e.Name())) })
		}
		cur = next
	}
	return cur, nil
}

// grow watches rel, a directory in tree t, and every directory below it
// outside the skipped ones, each before it is listed; with emit, every entry
// found is reported.
func (s *watchSet) grow(rel, t string, emit func(string)) error {
	_, err := s.watch(s.abs(rel))
	switch {
	case errors.Is(err, errGone):
		return nil
	case errors.Is(err, ErrWatchLimit):
		return err
	case err != nil:
		s.report(err) // one directory we may not watch: the rest still can be
		return nil
	}
	var limit error
	s.list(rel, func(e fs.DirEntry) {
		child := join(rel, e.Name())
		if emit != nil {
			emit(child)
		}
		if limit == nil && e.IsDir() && !skipped(child, t) {
			limit = s.grow(child, t, emit)
		}
	})
	return limit
}

// created handles a new entry rel of kind k: a directory inside a watched
// tree gets watched, with everything below it, and everything found is
// reported.
func (s *watchSet) created(rel string, k kind, emit func(string)) error {
	if k == kindFile {
		return nil
	}
	t, ok := s.scope.tree(rel)
	if !ok || rel == t || !s.grown[t] {
		return nil // tree roots come and go through reconcile
	}
	if k == kindUnknown && !isDir(s.abs(rel)) {
		return nil
	}
	return s.grow(rel, t, emit)
}

// resync repairs the watch set after events were lost (a queue overflow):
// watches on directories that are gone are dropped, and every tree is walked
// again for directories that were created unseen.
func (s *watchSet) resync() error {
	for dir := range s.held {
		if !isDir(dir) {
			s.drop(dir)
		}
	}
	if _, err := s.reconcile(nil); err != nil {
		return err
	}
	for _, t := range s.scope.trees {
		if s.grown[t] {
			if err := s.grow(t, t, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// watch adds a watch on dir unless one is held, and reports whether it did.
func (s *watchSet) watch(dir string) (bool, error) {
	if s.holds(dir) {
		return false, nil
	}
	if err := s.fsw.Add(dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return false, errGone
		}
		return false, watchError(dir, err)
	}
	s.held[dir] = struct{}{}
	return true, nil
}

// drop releases the watches on dir and every directory below it: after a
// rename they would report events under the old names.
func (s *watchSet) drop(dir string) {
	for d := range s.held {
		if d == dir || under(d, dir) {
			s.unwatch(d)
		}
	}
}

// sweep releases every watch that is neither wanted nor inside a watched tree.
func (s *watchSet) sweep(want map[string]struct{}) {
	for d := range s.held {
		if _, ok := want[d]; ok || s.inTree(d, want) {
			continue
		}
		s.unwatch(d)
	}
}

func (s *watchSet) inTree(dir string, want map[string]struct{}) bool {
	rel, ok := s.rel(dir)
	if !ok {
		return false
	}
	t, ok := s.scope.tree(rel)
	if !ok {
		return false
	}
	_, ok = want[s.abs(t)]
	return ok
}

func (s *watchSet) unwatch(dir string) {
	delete(s.held, dir)
	if rel, ok := s.rel(dir); ok {
		delete(s.grown, rel) // if it is a tree root, its tree must grow again
	}
	// The kernel drops the watch of a deleted directory by itself, and
	// fsnotify forgets it: an error here only says so.
	_ = s.fsw.Remove(dir)
}

// list calls fn for each entry of the directory rel, in no particular order.
func (s *watchSet) list(rel string, fn func(fs.DirEntry)) {
	// O_DIRECTORY: a FIFO where a directory was named fails at once, unopened.
	f, err := os.OpenFile(s.abs(rel), os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			s.report(err)
		}
		return
	}
	defer f.Close()
	for {
		entries, err := f.ReadDir(256)
		for _, e := range entries {
			fn(e)
		}
		if err != nil {
			return // io.EOF, or the directory went away while being read
		}
	}
}

func inodeOf(name string) uint64 {
	fi, err := os.Stat(name)
	if err != nil {
		return 0
	}
	return inode(fi)
}

func isDir(name string) bool {
	fi, err := os.Stat(name)
	return err == nil && fi.IsDir()
}

// nearestDir returns name if it is a directory, else its nearest ancestor that is.
func nearestDir(name string) string {
	for !isDir(name) {
		up := filepath.Dir(name)
		if up == name {
			return name
		}
		name = up
	}
	return name
}

// under reports whether name lies strictly below dir.
func under(name, dir string) bool {
	if !strings.HasPrefix(name, dir) || len(name) <= len(dir) {
		return false
	}
	return strings.HasSuffix(dir, string(filepath.Separator)) || name[len(dir)] == filepath.Separator
}
