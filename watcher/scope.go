package watcher

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// skipDirs are never entered by a tree walk, unless the tree root itself lies
// in (or is) one of them: they are large, churn a lot, and a plan's globs
// almost never mean them.
var skipDirs = []string{".git", "node_modules"}

// scope is what the caller asked for, cleaned: which changes matter and which
// directories must be watched to see them. Paths are slash separated and
// relative to the root; "" is the root itself.
type scope struct {
	paths []string // sorted
	trees []string // sorted
}

func newScope(paths, trees []string) (scope, error) {
	var s scope
	var err error
	if s.paths, err = cleanAll(paths); err != nil {
		return scope{}, err
	}
	if s.trees, err = cleanAll(trees); err != nil {
		return scope{}, err
	}
	return s, nil
}

// at returns the elements of sorted that are rel or lie below it: one
// stretch of the sorted list, found by binary search.
func (s scope) at(sorted []string, rel string) []string {
	if rel == "" {
		return sorted
	}
	var out []string
	if _, ok := slices.BinarySearch(sorted, rel); ok {
		out = append(out, rel)
	}
	prefix := rel + "/"
	i, _ := slices.BinarySearch(sorted, prefix)
	for ; i < len(sorted) && strings.HasPrefix(sorted[i], prefix); i++ {
		out = append(out, sorted[i])
	}
	return out
}

func cleanAll(in []string) ([]string, error) {
	if sortedClean(in) {
		// What a plan's watch set gives already: a compare and a scan a path
		// instead of cleaning and sorting them all again on every Update.
		return slices.Clone(in), nil
	}
	out := make([]string, 0, len(in))
	for _, p := range in {
		c, err := cleanRel(p)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// sortedClean reports whether cleanAll would return in as it is: strictly
// increasing, and every path clean and inside the workspace.
func sortedClean(in []string) bool {
	for i, p := range in {
		if i > 0 && in[i-1] >= p || !isCleanRel(p) {
			return false
		}
	}
	return true
}

// isCleanRel reports whether cleanRel returns p unchanged: "" (the root), or
// names joined by single slashes, none of them "." or "..".
func isCleanRel(p string) bool {
	if p == "" {
		return true
	}
	start := 0
	for i := 0; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		if seg := p[start:i]; seg == "" || seg == "." || seg == ".." {
			return false
		}
		start = i + 1
	}
	return true
}

// cleanRel cleans a workspace-relative path; it refuses absolute paths and
// paths that climb out of the workspace.
func cleanRel(p string) (string, error) {
	if filepath.IsAbs(p) || path.IsAbs(filepath.ToSlash(p)) {
		return "", fmt.Errorf("path %q: must be relative to the workspace", p)
	}
	c := path.Clean(filepath.ToSlash(p))
	if c == "." {
		return "", nil
	}
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("path %q: leaves the workspace", p)
	}
	return c, nil
}

// relevant reports whether a change to rel matters: it is one of the paths or
// lies below one, or it lies in a tree outside the skipped directories. The
// root as a path ("" or ".") is its entries only, as the poller scans it: the
// whole workspace is the tree "". A root path that took in everything below
// it would make every write anywhere (a consumer's own journal, an agent's
// files) activity that holds a gate opened beside it for a settle window.
func (s scope) relevant(rel string) bool {
	if rel == "" {
		return false // the root itself: handled as a rescan, never a path
	}
	if s.isNamed("") && !strings.Contains(rel, "/") {
		return true
	}
	// rel or a directory above it is a path: a binary search per level,
	// however many paths there are.
	for p := rel; ; {
		if s.isNamed(p) {
			return true
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			break
		}
		p = p[:i]
	}
	for _, t := range s.trees {
		if within(rel, t) && !skipped(rel, t) {
			return true
		}
	}
	return false
}

// isNamed reports whether rel is exactly one of the paths: such a change is
// reported even when the name looks like an editor's scratch file.
func (s scope) isNamed(rel string) bool {
	_, ok := slices.BinarySearch(s.paths, rel)
	return ok
}

// tree returns the tree that holds rel and whether there is one; rel must not
// lie in a skipped directory of it.
func (s scope) tree(rel string) (string, bool) {
	for _, t := range s.trees {
		if within(rel, t) && !skipped(rel, t) {
			return t, true
		}
	}
	return "", false
}

// anchors are the paths and tree roots. The chain of directories from the
// root down to each is watched, as far as it exists, so that creating,
// removing or renaming any of them is seen.
func (s scope) anchors() []string {
	a := slices.Concat(s.paths, s.trees)
	slices.Sort(a)
	return slices.Compact(a)
}

// within reports whether rel is base or lies below it.
func within(rel, base string) bool {
	if base == "" || rel == base {
		return true
	}
	return len(rel) > len(base) && rel[len(base)] == '/' && strings.HasPrefix(rel, base)
}

// skipped reports whether rel, below tree root t, lies in a skipped directory.
func skipped(rel, t string) bool {
	rest := rel
	if t != "" {
		rest = strings.TrimPrefix(rel[len(t):], "/")
	}
	for rest != "" {
		var name string
		name, rest, _ = strings.Cut(rest, "/")
		if slices.Contains(skipDirs, name) && !hasComponent(t, name) {
			return true
		}
	}
	return false
}

func hasComponent(p, name string) bool {
	return slices.Contains(strings.Split(p, "/"), name)
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}
