//go:build !linux

package watcher

import (
	"path/filepath"

	"github.com/fsnotify/fsnotify"
)

// fsnotifier is fsnotify (kqueue, FEN, ReadDirectoryChangesW) behind the
// notifier interface. Its events are gathered into slices: each slice is what
// was ready when the first one came.
type fsnotifier struct {
	fsw    *fsnotify.Watcher
	events chan []event
	done   chan struct{}
	exited chan struct{}
}

func newNotifier() (notifier, error) {
	fsw, err := fsnotify.NewBufferedWatcher(4096)
	if err != nil {
		return nil, err
	}
	n := &fsnotifier{fsw: fsw, events: make(chan []event, eventSlices), done: make(chan struct{}), exited: make(chan struct{})}
	go n.gather()
	return n, nil
}

func (n *fsnotifier) Add(dir string) error    { return n.fsw.Add(dir) }
func (n *fsnotifier) Remove(dir string) error { return n.fsw.Remove(dir) }
func (n *fsnotifier) Events() <-chan []event  { return n.events }
func (n *fsnotifier) Errors() <-chan error    { return n.fsw.Errors }
func (n *fsnotifier) WatchList() []string     { return n.fsw.WatchList() }

// Close may be called once.
func (n *fsnotifier) Close() error {
	close(n.done)
	err := n.fsw.Close() // closes fsnotify's channels, which ends gather
	<-n.exited
	return err
}

func (n *fsnotifier) gather() {
	defer close(n.exited)
	defer close(n.events)
	for ev := range n.fsw.Events {
		evs := []event{convert(ev)}
	more:
		for len(evs) < 4096 {
			select {
			case ev, ok := <-n.fsw.Events:
				if !ok {
					break more
				}
				evs = append(evs, convert(ev))
			default:
				break more
			}
		}
		select {
		case n.events <- evs:
		case <-n.done:
			return
		}
	}
}

func convert(ev fsnotify.Event) event {
	e := event{name: filepath.Clean(ev.Name)}
	for _, m := range []struct {
		from fsnotify.Op
		to   op
	}{{fsnotify.Create, opCreate}, {fsnotify.Write, opWrite}, {fsnotify.Remove, opRemove}, {fsnotify.Rename, opRename}, {fsnotify.Chmod, opChmod}} {
		if ev.Has(m.from) {
			e.op |= m.to
		}
	}
	return e
}
