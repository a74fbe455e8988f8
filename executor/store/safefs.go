package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/stepseq/stepseq/planspec"
	planpkg "github.com/stepseq/stepseq/planspec/plan"
)

// Every file stepseq reads from a workspace (plans, triggers, reports, state.json)
// was put there by an agent or a person and may be anything: a FIFO that blocks an
// open or a read for ever, a device, a directory, a file of gigabytes, or a
// symbolic link out of the workspace. Such reads go through ReadFileIn or ReadFile,
// which refuse all of these before they could block or echo what lies outside.

// ErrNotRegular is returned for a path that is a FIFO, a device, a socket or a
// directory: stepseq reads regular files only.
var ErrNotRegular = errors.New("not a regular file")

// ErrOverCap is returned for a file larger than its Cap.
var ErrOverCap = errors.New("over the size cap")

// ErrOutsideWorkspace is returned for a path that leaves the workspace through a
// symbolic link or "..". The link's target is never named.
var ErrOutsideWorkspace = errors.New("a path out of the workspace")

// Cap bounds one kind of file: what is read, and a name for it in messages.
type Cap struct {
	Bytes int64
	What  string // "a plan", "a state file"
	Hint  string // what to do instead
}

// The caps on what is read from a workspace. A plan or a report is a few
// kilobytes, a state a few per step: anything near a cap is a mistake or an
// attack, refused before it is read whole.
var (
	PlanCap = Cap{Bytes: planpkg.MaxPlanSize, What: "a plan",
		Hint: "a plan is a few kilobytes; keep long instructions in files the steps read"}
	StateCap = Cap{Bytes: planspec.MaxStateSize, What: "a state file",
		Hint: "a state is a few kilobytes per step; this is not one"}
	ReportCap = Cap{Bytes: planspec.MaxReportSize, What: "a report",
		Hint: "a report is a few kilobytes; point at files for the rest"}
	TriggerCap = Cap{Bytes: 64 << 10, What: "a trigger"}
	// RecordCap bounds stepseq's own small records under .stepseq/.
	RecordCap = Cap{Bytes: 1 << 20, What: "a stepseq record"}
)

// CapError says a file is over its cap, by how much, and what the cap is for.
type CapError struct {
	Name string
	Size int64 // the file's size; 0 when it grew past the cap while read
	Cap  Cap
}

func (e *CapError) Error() string {
	size, limit := sizeString(e.Size), sizeString(e.Cap.Bytes)
	if size == limit {
		size = fmt.Sprintf("%d bytes", e.Size)
	}
	msg := fmt.Sprintf("%s: %s is over the %s cap for %s", e.Name, size, limit, e.Cap.What)
	if e.Size == 0 {
		msg = fmt.Sprintf("%s: grew over the %s cap for %s while read", e.Name, limit, e.Cap.What)
	}
	if e.Cap.Hint != "" {
		msg += ": " + e.Cap.Hint
	}
	return msg
}

// Is makes a CapError match ErrOverCap.
func (e *CapError) Is(target error) bool { return target == ErrOverCap }

// ReadFileIn reads rel, a slash-separated path inside root, whole. A symbolic
// link is followed only while it stays inside root. Anything but a regular file
// is refused before it is read (a FIFO is opened without blocking, and never
// read), and so is a file over c.Bytes, without reading it.
func ReadFileIn(root *os.Root, rel string, c Cap) ([]byte, error) {
	data, _, err := ReadFileInfoIn(root, rel, c)
	return data, err
}

// ReadFileInfoIn is ReadFileIn with the file's information, for a caller that needs
// its time too.
func ReadFileInfoIn(root *os.Root, rel string, c Cap) ([]byte, os.FileInfo, error) {
	if root == nil {
		return nil, nil, fmt.Errorf("%s: no workspace root", rel)
	}
	fi, err := root.Stat(rel)
	if err != nil {
		return nil, nil, rootError(rel, err)
	}
	if err := regular(rel, fi); err != nil {
		return nil, nil, err
	}
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, rootError(rel, err)
	}
	defer f.Close()
	data, err := readCapped(f, rel, c, nil)
	return data, fi, err
}

// ReadFile is ReadFileIn for a path named outright, such as the state file or a
// plan given on the command line: it follows symbolic links, and refuses what is
// not a regular file or is over c.Bytes the same way.
func ReadFile(path string, c Cap) ([]byte, error) { return readFileInto(path, c, nil) }

// readFileInto is ReadFile reading into buf's storage when it is large enough.
func readFileInto(path string, c Cap, buf []byte) ([]byte, error) {
	f, fi, err := openChecked(path, c)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readChecked(f, fi, path, c, buf)
}

// openChecked opens the file at path as ReadFile reads it: a regular file
// (checked before it is opened, so that a FIFO is never opened to block, and
// again once open, as it may have been swapped), opened without blocking, not
// over c.
func openChecked(path string, c Cap) (*os.File, fs.FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if err := regular(path, fi); err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	if fi, err = checkOpen(f, path, c); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// readOpenInto is readFileInto past its Stat: it opens path without blocking
// on a FIFO and reads it capped, checking the open file.
func readOpenInto(path string, c Cap, buf []byte) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readCapped(f, path, c, buf)
}

// readCapped checks the open file again (it may have been swapped since the
// Stat) and reads at most c.Bytes+1 of it.
func readCapped(f *os.File, name string, c Cap, into []byte) ([]byte, error) {
	fi, err := checkOpen(f, name, c)
	if err != nil {
		return nil, err
	}
	return readChecked(f, fi, name, c, into)
}

// readChecked reads at most c.Bytes+1 of f, checked already as checkOpen
// does; fi is what the check found.
func readChecked(f *os.File, fi fs.FileInfo, name string, c Cap, into []byte) ([]byte, error) {
	// The size is a hint: the file may grow while it is read.
	if int64(cap(into)) < fi.Size()+bytes.MinRead {
		into = make([]byte, 0, fi.Size()+bytes.MinRead)
	}
	buf := bytes.NewBuffer(into[:0])
	if _, err := buf.ReadFrom(io.LimitReader(f, c.Bytes+1)); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if int64(buf.Len()) > c.Bytes {
		return nil, &CapError{Name: name, Cap: c}
	}
	return buf.Bytes(), nil
}

// checkOpen checks an open file as readCapped does before reading it: a
// regular file, not over c.
func checkOpen(f *os.File, name string, c Cap) (fs.FileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := regular(name, fi); err != nil {
		return nil, err
	}
	if fi.Size() > c.Bytes {
		return nil, &CapError{Name: name, Size: fi.Size(), Cap: c}
	}
	return fi, nil
}

// ReadStatuses reads the statuses of the state file at path as it streams by
// (planspec.ReadStatuses), refusing what ReadFile refuses.
func ReadStatuses(path string) (planspec.Statuses, error) {
	f, _, err := openChecked(path, StateCap)
	if err != nil {
		return planspec.Statuses{}, err
	}
	defer f.Close()
	return planspec.ReadStatuses(f, path)
}

func regular(name string, fi fs.FileInfo) error {
	if fi.Mode().IsRegular() {
		return nil
	}
	return fmt.Errorf("%s: %w (%s)", name, ErrNotRegular, kindOf(fi.Mode()))
}

func kindOf(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a plain file"
}

// rootError words an os.Root failure without the target of any link: a path
// that escapes the root becomes ErrOutsideWorkspace.
func rootError(rel string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Err.Error() == "path escapes from parent" {
		return fmt.Errorf("%s: %w: refused", rel, ErrOutsideWorkspace)
	}
	return err
}

// sizeString writes a size the way a person reads it: MiB from one MiB up, then KiB.
func sizeString(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
