package store

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// LogPart is part of a try's log as ReadLog read it.
type LogPart struct {
	Data  []byte
	Start int64 // where Data begins in the log; > 0 when the log's start was left out
	Size  int64 // the log's size when it was read
}

// ReadLog reads step's try's log from byte from to its end, or, when more than
// most bytes follow from, its last most bytes. A log smaller than from was cut or
// rewritten: it is read from its start. It reads through root (nil: the
// workspace is opened for this read), as every file an agent may have touched is
// read: a log that is a link out of the workspace, a FIFO, a device or a folder
// is refused unread. A try with no log is fs.ErrNotExist.
func (w Workspace) ReadLog(root *os.Root, step string, try int, from, most int64) (LogPart, error) {
	return w.ReadLogFile(root, w.LogPath(step, try), fmt.Sprintf("step %s try %d's log", step, try), from, most)
}

// ReadLogFile is ReadLog for a log of the workspace named by its path (an
// earlier run's, set aside by SetAsideEarlierRun); what names it in errors.
func (w Workspace) ReadLogFile(root *os.Root, path, what string, from, most int64) (LogPart, error) {
	rel, err := filepath.Rel(w.Dir, path)
	if err != nil {
		return LogPart{}, err
	}
	if root == nil {
		if root, err = os.OpenRoot(w.Dir); err != nil {
			return LogPart{}, err
		}
		defer root.Close()
	}
	fi, err := root.Stat(rel)
	if err != nil {
		return LogPart{}, rootError(rel, err)
	}
	if err := regular(rel, fi); err != nil {
		return LogPart{}, fmt.Errorf("%s: %w", what, err)
	}
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return LogPart{}, rootError(rel, err)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil { // it may have been swapped since
		return LogPart{}, err
	}
	if err := regular(rel, fi); err != nil {
		return LogPart{}, fmt.Errorf("%s: %w", what, err)
	}
	p := LogPart{Size: fi.Size()}
	if from > p.Size {
		from = 0
	}
	p.Start = max(from, p.Size-most)
	if p.Data, err = io.ReadAll(io.NewSectionReader(f, p.Start, p.Size-p.Start)); err != nil {
		return LogPart{}, fmt.Errorf("read %s: %w", rel, err)
	}
	return p, nil
}
