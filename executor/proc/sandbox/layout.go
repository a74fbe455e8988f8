package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// A rank orders the mounts made at the same depth: bwrap makes them in the order
// given, and a later mount hides what an earlier one showed at or under its path.
type rank int

const (
	hide  rank = iota // a private, empty folder over the host's (/tmp)
	show              // the host's path, read-only
	write             // the host's path, writable
	guard             // the host's path read-only, over something writable
)

type mount struct {
	rank rank
	path string // the same inside and out
}

func (m mount) args() []string {
	switch m.rank {
	case hide:
		return []string{"--tmpfs", m.path}
	case write:
		return []string{"--bind", m.path, m.path}
	}
	return []string{"--ro-bind", m.path, m.path}
}

// layout is the sandbox's filesystem beyond the read-only root: its mounts in the
// order bwrap must make them, and the folder the agent starts in.
type layout struct {
	dir    string
	mounts []mount
}

// plan lays out spec's filesystem. Every path is resolved to the one it names
// (symbolic links followed) before it is mounted: bwrap mounts over what a path
// names, and a link could otherwise carry a writable mount out of its folder.
func plan(spec Spec) (*layout, error) {
	ws, err := folder("workspace", spec.Workspace)
	if err != nil {
		return nil, err
	}
	protected, err := patterns(spec.Protected)
	if err != nil {
		return nil, err
	}
	l := &layout{dir: ws}
	// Private before anything under them, such as a workspace under /tmp.
	l.add(hide, "/tmp")
	l.add(hide, "/dev/shm")
	if spec.Worktree == "" {
		if err := l.top(ws, protected); err != nil {
			return nil, err
		}
	} else {
		if l.dir, err = folder("worktree", spec.Worktree); err != nil {
			return nil, err
		}
		l.add(guard, ws)
		l.add(write, l.dir)
	}
	if spec.ReportDir != "" {
		if err := l.writable("report folder", spec.ReportDir, ws, nil, 0o755); err != nil {
			return nil, err
		}
	}
	for _, p := range spec.Write {
		if err := l.writable("write path", p, ws, protected, 0o755); err != nil {
			return nil, err
		}
	}
	for _, p := range spec.PresetDirs {
		if err := l.writable("preset folder", p, ws, protected, 0o700); err != nil {
			return nil, err
		}
	}
	for _, p := range spec.Read {
		if err := l.readable(p); err != nil {
			return nil, err
		}
	}
	// Last, to find the folders made for the report folder (.stepseq) too.
	l.guards(protected)
	// Stable: of two mounts at one depth and rank, the first given is made first.
	slices.SortStableFunc(l.mounts, func(a, b mount) int {
		if d := strings.Count(a.path, "/") - strings.Count(b.path, "/"); d != 0 {
			return d
		}
		return int(a.rank - b.rank)
	})
	return l, nil
}

func (l *layout) add(r rank, p string) {
	m := mount{rank: r, path: p}
	if !slices.Contains(l.mounts, m) {
		l.mounts = append(l.mounts, m)
	}
}

// top lays out a workspace the agent writes in itself: its top folder read-only,
// each entry in it writable but the protected ones. A read-only bind of a file
// would not do: stepseq replaces a run file by renaming a new one onto it, which
// drops the bind, and a run file it makes while the agent runs would have none.
// Links stay as they are: what they point to is writable where it lies, or not.
func (l *layout) top(ws string, protected []string) error {
	l.add(show, ws)
	entries, err := os.ReadDir(ws)
	if err != nil {
		return fmt.Errorf("sandbox: workspace: %w", err)
	}
	for _, e := range entries {
		if isProtected(e.Name(), protected) || !(e.Type().IsDir() || e.Type().IsRegular()) {
			continue
		}
		l.add(write, filepath.Join(ws, e.Name()))
	}
	return nil
}

// guards keeps read-only what the protected patterns match in the agent's folder
// now, over whatever made it writable. What a link among them points to is kept
// read-only too: a writable target would make the link writable.
func (l *layout) guards(protected []string) {
	for _, pat := range protected {
		// The patterns are checked: Glob has no other error.
		matches, _ := filepath.Glob(filepath.Join(l.dir, filepath.FromSlash(pat)))
		for _, m := range matches {
			if real, err := filepath.EvalSymlinks(m); err == nil {
				l.add(guard, real)
			}
		}
	}
}

// writable adds a writable path, made as a folder with perm when missing. It may
// neither hold the workspace or the agent's folder (their protected paths would
// be writable) nor lie in a protected path, unless protected is nil (the report
// folder, which lies in .stepseq).
func (l *layout) writable(what, p, ws string, protected []string, perm fs.FileMode) error {
	abs, err := expand(p, l.dir)
	if err != nil {
		return fmt.Errorf("sandbox: %s %q: %w", what, p, err)
	}
	if err := l.allowed(what, abs, ws, protected); err != nil {
		return err
	}
	if _, err := os.Lstat(abs); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(abs, perm); err != nil {
			return fmt.Errorf("sandbox: %s: %w", what, err)
		}
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return fmt.Errorf("sandbox: %s: %w", what, err)
	}
	if real != abs {
		if err := l.allowed(what, real, ws, protected); err != nil {
			return err
		}
	}
	l.add(write, real)
	return nil
}

func (l *layout) allowed(what, p, ws string, protected []string) error {
	for _, root := range []string{ws, l.dir} {
		if _, ok := under(root, p); ok {
			return fmt.Errorf("sandbox: %s %s holds %s, whose protected paths must stay read-only", what, p, root)
		}
		if rel, ok := under(p, root); ok && protected != nil && isProtected(rel, protected) {
			return fmt.Errorf("sandbox: %s %s is protected: it must stay read-only", what, p)
		}
	}
	return nil
}

// readable shows a path read-only, where the sandbox would hide it.
func (l *layout) readable(p string) error {
	abs, err := expand(p, l.dir)
	if err != nil {
		return fmt.Errorf("sandbox: read path %q: %w", p, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return fmt.Errorf("sandbox: read path: %w", err)
	}
	l.add(show, real)
	return nil
}

// folder resolves the workspace or the worktree, an absolute path to a folder.
func folder(what, p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("sandbox: %s %q: not an absolute path", what, p)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("sandbox: %s: %w", what, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("sandbox: %s: %w", what, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("sandbox: %s %s: not a folder", what, p)
	}
	return real, nil
}

// patterns are DefaultProtected and extra, checked: relative slash paths whose
// elements are path.Match patterns.
func patterns(extra []string) ([]string, error) {
	all := make([]string, 0, len(DefaultProtected)+len(extra))
	for _, p := range append(slices.Clone(DefaultProtected), extra...) {
		clean := path.Clean(strings.TrimSuffix(p, "/"))
		if p == "" || path.IsAbs(clean) || clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
			return nil, fmt.Errorf("sandbox: protected %q: not a path inside the step's folder", p)
		}
		if _, err := path.Match(clean, ""); err != nil {
			return nil, fmt.Errorf("sandbox: protected %q: %w", p, err)
		}
		all = append(all, clean)
	}
	return all, nil
}

// isProtected reports whether rel (a slash path in the step's folder) is or lies
// in a path a pattern matches.
func isProtected(rel string, protected []string) bool {
	elems := strings.Split(rel, "/")
	for _, pat := range protected {
		pe := strings.Split(pat, "/")
		if len(pe) > len(elems) {
			continue
		}
		match := true
		for i := range pe {
			if ok, _ := path.Match(pe[i], elems[i]); !ok {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// under reports whether p is root or lies in it, and its slash path from root.
func under(p, root string) (rel string, ok bool) {
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return filepath.ToSlash(rel), true
}
