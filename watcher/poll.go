package watcher

import (
	"io/fs"
	"os"
	"path/filepath"
)

// poller finds changes by comparing stat snapshots of the watched paths (a
// directory with its entries) and trees, for file systems that deliver no
// events. It is the opt-in fallback: each scan costs a stat per file.
type poller struct {
	root   string
	scope  scope
	snap   map[string]stamp
	rootOK bool
	rootID uint64 // the root's inode: a root made again between two scans is new
}

// stamp is what a scan compares: a rename into place changes the inode even
// when size and time look the same.
type stamp struct {
	mtime int64
	size  int64
	mode  fs.FileMode
	ino   uint64
}

// scan takes a new snapshot and passes every path that appeared, vanished or
// changed to emit (when not nil). It reports true when the root came back
// after it was missing, or was replaced: then anything may have changed.
func (p *poller) scan(emit func(rel string)) (rescan bool) {
	next := make(map[string]stamp, len(p.snap))
	var rootID uint64
	fi, err := os.Stat(p.root)
	rootOK := err == nil && fi.IsDir()
	if rootOK {
		rootID = inode(fi)
		for _, rel := range p.scope.paths {
			p.stat(rel, next)
		}
		for _, t := range p.scope.trees {
			p.walk(t, next)
		}
	}
	rescan = rootOK && (!p.rootOK || rootID != p.rootID) && p.snap != nil
	if emit != nil {
		for rel, st := range next {
			if old, ok := p.snap[rel]; !ok || old != st {
				emit(rel)
			}
		}
		for rel := range p.snap {
			if _, ok := next[rel]; !ok {
				emit(rel)
			}
		}
	}
	p.snap, p.rootOK, p.rootID = next, rootOK, rootID
	return rescan
}

// stat records rel and, when it is a directory, its entries.
func (p *poller) stat(rel string, into map[string]stamp) {
	dir := filepath.Join(p.root, filepath.FromSlash(rel))
	fi, err := os.Lstat(dir)
	if err != nil {
		return
	}
	if rel != "" {
		into[rel] = stampOf(fi)
	}
	if !fi.IsDir() {
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if fi, err := e.Info(); err == nil {
			into[join(rel, e.Name())] = stampOf(fi)
		}
	}
}

// walk records everything in tree t outside the skipped directories.
func (p *poller) walk(t string, into map[string]stamp) {
	top := filepath.Join(p.root, filepath.FromSlash(t))
	_ = filepath.WalkDir(top, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // vanished or unreadable: it simply is not in the snapshot
		}
		rel, _ := filepath.Rel(p.root, name)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if d.IsDir() && skipped(rel, t) {
			return filepath.SkipDir
		}
		if fi, err := d.Info(); err == nil {
			into[rel] = stampOf(fi)
		}
		return nil
	})
}

func stampOf(fi fs.FileInfo) stamp {
	return stamp{mtime: fi.ModTime().UnixNano(), size: fi.Size(), mode: fi.Mode(), ino: inode(fi)}
}
