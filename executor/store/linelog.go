package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// LineLog is an append-only file of lines, bounded in size: past Max bytes it
// becomes Path.1 and a new one starts. The journal and the notification feed are
// LineLogs. Every line is in the file whole or not at all: a write that fails
// partway (a full disk) is cut back to where it began, and a line left torn by a
// crash is cut when the file is next opened, so a retried line never runs on from
// a partial one.
type LineLog struct {
	Path string
	Max  int64 // 0: never rotates

	mu   sync.Mutex
	f    *os.File
	size int64
	// write is (*os.File).write; tests put a failing one in its place.
	write func(f *os.File, b []byte) (int, error)
}

// maxTornScan bounds how far back open looks for the end of the last whole line.
const maxTornScan = 1 << 20

// Append appends line, which ends in a newline.
func (l *LineLog) Append(line []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.open(); err != nil {
		return err
	}
	if l.Max > 0 && l.size > 0 && l.size+int64(len(line)) > l.Max {
		l.f.Close()
		l.f = nil
		if err := os.Rename(l.Path, l.Path+".1"); err != nil {
			return err
		}
		if err := l.open(); err != nil {
			return err
		}
	}
	write := l.write
	if write == nil {
		write = (*os.File).Write
	}
	n, err := write(l.f, line)
	if err == nil {
		l.size += int64(n)
		return nil
	}
	if n > 0 {
		if cerr := l.cut(n); cerr != nil {
			// The partial line stays: the next open cuts it, before anything
			// else is appended.
			l.f.Close()
			l.f = nil
			return errors.Join(err, cerr)
		}
	}
	return err
}

// cut removes the n bytes the failed write left at the end of the file, unless
// another writer appended after them (then only a reopen can tell where lines end).
func (l *LineLog) cut(n int) error {
	end, err := l.f.Seek(0, io.SeekCurrent) // O_APPEND: just past what was written
	if err != nil {
		return fmt.Errorf("cut a partial line: %w", err)
	}
	fi, err := l.f.Stat()
	if err != nil {
		return fmt.Errorf("cut a partial line: %w", err)
	}
	if fi.Size() != end {
		return fmt.Errorf("cut a partial line: %s grew past it", l.Path)
	}
	if err := l.f.Truncate(end - int64(n)); err != nil {
		return fmt.Errorf("cut a partial line: %w", err)
	}
	l.size = end - int64(n)
	return nil
}

func (l *LineLog) open() error {
	if l.f != nil {
		return nil
	}
	// O_NONBLOCK: a FIFO put in the file's place fails the open instead of
	// waiting for a reader; O_NOFOLLOW: a symlink does not redirect the writes.
	// The folder is made only when the open finds none.
	const flags = os.O_RDWR | os.O_APPEND | os.O_CREATE | syscall.O_NONBLOCK | syscall.O_NOFOLLOW
	f, err := os.OpenFile(l.Path, flags, 0o644)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(l.Path), 0o755); err != nil {
			return err
		}
		f, err = os.OpenFile(l.Path, flags, 0o644)
	}
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err == nil {
		err = regular(l.Path, fi)
	}
	var size int64
	if err == nil {
		size, err = cutTorn(f, fi.Size())
	}
	if err != nil {
		f.Close()
		return err
	}
	l.f, l.size = f, size
	return nil
}

// cutTorn ends the file of size bytes after its last newline, and returns the
// size it has then. When no newline is within maxTornScan of the end, a newline is
// appended instead, so that the torn line stays a line of its own.
func cutTorn(f *os.File, size int64) (int64, error) {
	if size == 0 {
		return 0, nil
	}
	var last [1]byte
	if _, err := f.ReadAt(last[:], size-1); err != nil {
		return size, fmt.Errorf("read the end of %s: %w", f.Name(), err)
	}
	if last[0] == '\n' {
		return size, nil
	}
	start := max(0, size-maxTornScan)
	buf := make([]byte, size-start)
	if _, err := f.ReadAt(buf, start); err != nil && err != io.EOF {
		return size, fmt.Errorf("read the end of %s: %w", f.Name(), err)
	}
	keep := int64(-1)
	if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
		keep = start + int64(i) + 1
	} else if start == 0 {
		keep = 0
	}
	if keep < 0 {
		if _, err := f.Write([]byte{'\n'}); err != nil {
			return size, fmt.Errorf("end the torn line of %s: %w", f.Name(), err)
		}
		return size + 1, nil
	}
	if err := f.Truncate(keep); err != nil {
		return size, fmt.Errorf("cut the torn line of %s: %w", f.Name(), err)
	}
	return keep, nil
}

// Close closes the file.
func (l *LineLog) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
