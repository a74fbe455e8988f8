package watcher

import (
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"
)

// inotifyMask is what the watcher asks the kernel for: what fsnotify asks for
// by default (create, write, remove, rename, chmod).
const inotifyMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_DELETE | unix.IN_DELETE_SELF |
	unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_MOVE_SELF | unix.IN_ATTRIB

// readSize is one read of the kernel's queue: up to 4096 events.
const readSize = 4096 * unix.SizeofInotifyEvent

// inotify reads the kernel's queue itself rather than through fsnotify, which
// hands events to its reader one at a time: in a burst of 100,000 files that
// costs a wakeup of the loop per event, and most of the watcher's CPU. Here
// each read becomes one slice of events. The kernel also says whether an entry
// is a directory, which saves the loop a stat per new file.
type inotify struct {
	fd     int
	wake   int // an eventfd that Close writes to, to end a wait in poll
	events chan []event
	errs   chan error
	done   chan struct{}
	exited chan struct{}
	once   sync.Once

	mu    sync.Mutex // the maps: Add and Remove on the loop, names on the reader
	paths map[int]string
	wds   map[string]int
}

func newNotifier() (notifier, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	n := &inotify{
		fd:     fd,
		wake:   wake,
		events: make(chan []event, eventSlices),
		errs:   make(chan error, 16),
		done:   make(chan struct{}),
		exited: make(chan struct{}),
		paths:  make(map[int]string),
		wds:    make(map[string]int),
	}
	go n.read()
	return n, nil
}

func (n *inotify) Events() <-chan []event { return n.events }
func (n *inotify) Errors() <-chan error   { return n.errs }

func (n *inotify) Add(dir string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	wd, err := unix.InotifyAddWatch(n.fd, dir, inotifyMask|unix.IN_ONLYDIR)
	if err != nil {
		return &os.PathError{Op: "inotify_add_watch", Path: dir, Err: err}
	}
	if old, ok := n.paths[wd]; ok && old != dir {
		delete(n.wds, old) // the same directory under another name
	}
	n.paths[wd] = dir
	n.wds[dir] = wd
	return nil
}

func (n *inotify) Remove(dir string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	wd, ok := n.wds[dir]
	if !ok {
		return &os.PathError{Op: "inotify_rm_watch", Path: dir, Err: unix.EINVAL}
	}
	delete(n.wds, dir)
	delete(n.paths, wd)
	if _, err := unix.InotifyRmWatch(n.fd, uint32(wd)); err != nil {
		return &os.PathError{Op: "inotify_rm_watch", Path: dir, Err: err}
	}
	return nil
}

func (n *inotify) WatchList() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	list := make([]string, 0, len(n.wds))
	for dir := range n.wds {
		list = append(list, dir)
	}
	return list
}

func (n *inotify) Close() error {
	var err error
	n.once.Do(func() {
		close(n.done)
		var one [8]byte
		binary.NativeEndian.PutUint64(one[:], 1)
		_, _ = unix.Write(n.wake, one[:]) // ends the reader's poll
		<-n.exited
		err = unix.Close(n.fd) // the kernel drops every watch
		unix.Close(n.wake)
	})
	return err
}

// read reads the kernel's queue until Close, a slice of events per read. It
// waits in poll(2) on the queue and the wake eventfd, and reads the queue
// directly: a wakeup costs the two system calls a plain blocking reader pays,
// no more, and no goroutine of the runtime's poller in between.
func (n *inotify) read() {
	defer close(n.exited)
	defer close(n.errs)
	defer close(n.events)
	buf := make([]byte, readSize)
	fds := []unix.PollFd{{Fd: int32(n.fd), Events: unix.POLLIN}, {Fd: int32(n.wake), Events: unix.POLLIN}}
	full := false // the last read filled the buffer: read again before waiting
	for {
		if !full {
			if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
				if !n.send(n.errs, err) {
					return
				}
				continue
			}
		}
		select {
		case <-n.done:
			return
		default:
		}
		k, err := unix.Read(n.fd, buf)
		switch {
		case err == unix.EAGAIN || err == unix.EINTR:
			full = false
			continue
		case err == nil && k < unix.SizeofInotifyEvent:
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			full = false
			if !n.send(n.errs, err) {
				return
			}
			continue
		}
		full = k > len(buf)-(unix.SizeofInotifyEvent+unix.PathMax)
		evs, overflow := n.parse(buf[:k])
		if overflow && !n.send(n.errs, fsnotify.ErrEventOverflow) {
			return
		}
		if len(evs) > 0 {
			select {
			case n.events <- evs:
			case <-n.done:
				return
			}
		}
	}
}

func (n *inotify) send(ch chan error, err error) bool {
	select {
	case ch <- err:
		return true
	case <-n.done:
		return false
	}
}

// parse turns one read into events, named by the watches they came from.
func (n *inotify) parse(buf []byte) (evs []event, overflow bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	evs = make([]event, 0, len(buf)/(unix.SizeofInotifyEvent+16))
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
		raw := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		nameAt := off + unix.SizeofInotifyEvent
		off = nameAt + int(raw.Len)
		mask := raw.Mask
		if mask&unix.IN_Q_OVERFLOW != 0 {
			overflow = true
			continue
		}
		dir, ok := n.paths[int(raw.Wd)]
		if !ok {
			continue // a watch released a moment ago
		}
		if mask&unix.IN_IGNORED != 0 {
			// The kernel dropped the watch: its directory is gone.
			delete(n.paths, int(raw.Wd))
			if n.wds[dir] == int(raw.Wd) {
				delete(n.wds, dir)
			}
			continue
		}
		name := dir
		if raw.Len > 0 && off <= len(buf) {
			b := buf[nameAt:off]
			for len(b) > 0 && b[len(b)-1] == 0 {
				b = b[:len(b)-1] // the name is padded with NULs
			}
			name = dir + string(filepath.Separator) + string(b)
		}
		ev := event{name: name, kind: kindFile}
		if mask&unix.IN_ISDIR != 0 || name == dir {
			ev.kind = kindDir
		}
		if mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 {
			ev.op |= opCreate
		}
		if mask&(unix.IN_DELETE|unix.IN_DELETE_SELF) != 0 {
			ev.op |= opRemove
		}
		if mask&unix.IN_MODIFY != 0 {
			ev.op |= opWrite
		}
		if mask&(unix.IN_MOVED_FROM|unix.IN_MOVE_SELF) != 0 {
			ev.op |= opRename
		}
		if mask&unix.IN_ATTRIB != 0 {
			ev.op |= opChmod
		}
		if ev.op != 0 {
			evs = append(evs, ev)
		}
	}
	return evs, overflow
}
