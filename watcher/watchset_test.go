package watcher

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// addHook is a notifier that records watches and runs then after each Add: a
// directory made between one look and the next, deterministically.
type addHook struct {
	watched map[string]bool
	then    func(dir string)
}

func (n *addHook) Add(dir string) error {
	if _, err := os.Stat(dir); err != nil {
		return err
	}
	n.watched[dir] = true
	if n.then != nil {
		n.then(dir)
	}
	return nil
}
func (n *addHook) Remove(dir string) error { delete(n.watched, dir); return nil }
func (n *addHook) Events() <-chan []event  { return nil }
func (n *addHook) Errors() <-chan error    { return nil }
func (n *addHook) WatchList() []string     { return nil }
func (n *addHook) Close() error            { return nil }
func (n *addHook) list() (out []string) {
	for d := range n.watched {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// The root comes back just as its parent is watched in its place: the parent's
// watch goes, and the root's is the only one held.
func TestWatchSet_RootBackWhileParentArmed(t *testing.T) {
	parent := t.TempDir()
	root := filepath.Join(parent, "ws")
	n := &addHook{watched: map[string]bool{}}
	n.then = func(dir string) {
		if dir == parent {
			if err := os.Mkdir(root, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	s := newWatchSet(n, root, scope{}, func(err error) { t.Error(err) })
	if rearmed, err := s.reconcile(nil); err != nil || !rearmed {
		t.Fatalf("reconcile() = %v, %v; want the root watched anew", rearmed, err)
	}
	if got := n.list(); !slices.Equal(got, []string{root}) {
		t.Errorf("watches %v, want only the root %s", got, root)
	}
	if !s.holds(root) || s.holds(parent) {
		t.Errorf("held %v", s.held)
	}
}
