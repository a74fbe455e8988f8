package store

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/google/renameio/v2"

	"github.com/stepseq/stepseq/planspec"
)

// ErrSymlink is returned when the state file is a symbolic link: replacing it would
// cut the link, and writing through it would reach outside the workspace. Its text
// reaches the user as it is.
var ErrSymlink = errors.New("state file is a symbolic link")

// ErrNoFolder is matched by a state read or write in a folder that does not exist.
var ErrNoFolder = errors.New("no such folder")

// ErrStateIsFolder is matched by a state path that names a folder.
var ErrStateIsFolder error = folderError{}

// folderError is a folder where the state file should be; it is also ErrNotRegular.
type folderError struct{}

func (folderError) Error() string        { return "a folder, not a state file" }
func (folderError) Is(target error) bool { return target == ErrNotRegular }

// NoFolder says that dir, where a state file should be, does not exist.
func NoFolder(dir string) error {
	return fmt.Errorf("%w: %s; create it or pass the workspace folder", ErrNoFolder, shownPath(dir))
}

// shownPath is path as the user would type it: relative to the working directory
// when it lies under it.
func shownPath(path string) string {
	wd, err := os.Getwd()
	if err != nil || !filepath.IsAbs(path) {
		return path
	}
	if rel, err := filepath.Rel(wd, path); err == nil && filepath.IsLocal(rel) {
		return rel
	}
	return path
}

// Bytes reads the file whole without parsing it, refusing a folder and a file over
// the size cap.
func (f *StateFile) Bytes() ([]byte, error) { return f.readBytes() }

// StateFile is a state.json on disk, read and replaced whole.
type StateFile struct {
	Path string
	// last is what this process last read or wrote, in pieces as it was
	// written, so that it can tell its own writes from others' and skip parsing
	// an unchanged file: a comparison of bytes, no hash.
	last [][]byte
	// unsynced: the last rename awaits its folder's fsync (Sync).
	unsynced bool
	// written identifies the file this process last wrote, when the file system
	// kept its stamp: while the file on disk still has it, it is that write.
	written fileIdent
	// kept is the state Preread parsed, for the next ReadIfChanged.
	kept *planspec.State
	// seen identifies the file the last read found, when its times tell any
	// later change (see readSettle): while the file on disk still has it, it
	// holds last, and a read of it can be skipped.
	seen fileIdent
}

// fileIdent is what stat tells of a file: a file this process wrote, stamped with
// a modification time no write can give (see stampAge), still has all of it until
// somebody else writes, truncates or replaces it.
type fileIdent struct {
	dev, ino     uint64
	size         int64
	mtime, ctime syscall.Timespec
}

// stampAge is how far in the past a written state's modification time is set. A
// later write by anybody sets the current time, which cannot be that stamp (file
// systems stamp at a granularity of milliseconds at most); so size, inode and
// times unchanged mean the bytes are the ones written, with no read and no hash.
const stampAge = time.Second

// readSettle is how long before a read a file's change time must lie for the
// file's stat to stand for its content afterwards. Any write, truncate or
// replace sets the change time to the current time, which a file system's clock
// (a kernel tick, 10 ms at most) never puts that far back; so a file changed
// after the read cannot keep the times it had. Change times coarser than a
// millisecond (FAT, some network file systems) are never trusted.
const readSettle = 25 * time.Millisecond

// settledIdent is fi's ident when its change time is readSettle or more before
// began, when the read that follows the stat began.
func settledIdent(fi fs.FileInfo, began time.Time) fileIdent {
	id, ok := identOf(fi)
	if !ok || id.ctime.Nsec%int64(time.Millisecond) == 0 || began.Sub(time.Unix(id.ctime.Unix())) < readSettle {
		return fileIdent{}
	}
	return id
}

func identOf(fi fs.FileInfo) (fileIdent, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileIdent{}, false
	}
	mtime, ctime := statTimes(st)
	return fileIdent{dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mtime: mtime, ctime: ctime}, true
}

// Read parses the file. A missing file returns (nil, fs.ErrNotExist).
func (f *StateFile) Read() (*planspec.State, error) {
	data, seen, err := f.readSeen(nil)
	if err != nil {
		return nil, err
	}
	return f.parse(data, seen)
}

// Preread is Read for a reader that hands the state on: the next ReadIfChanged
// that finds the file as it was read returns this state, as changed, rather than
// parse the same bytes again (at 50,000 steps a parse is most of a second). A
// Write, or a read that finds other content, drops it.
func (f *StateFile) Preread() (*planspec.State, error) {
	st, err := f.Read()
	f.kept = st
	return st, err
}

// PrereadState is the state Preread parsed, while the next ReadIfChanged may
// still hand it on.
func (f *StateFile) PrereadState() *planspec.State { return f.kept }

// ReadIfChanged reads the file and parses it only when its content differs from
// what this process last read or wrote: a file event on the state file is often
// the echo of this process's own write. changed is false for that echo.
func (f *StateFile) ReadIfChanged() (st *planspec.State, changed bool, err error) {
	kept := f.kept
	f.kept = nil
	if (f.written.ino != 0 || f.seen.ino != 0) && f.last != nil {
		if fi, err := os.Stat(f.Path); err == nil {
			if id, ok := identOf(fi); ok && (id == f.written || id == f.seen) {
				// The file this process wrote or last read, untouched.
				if kept != nil {
					return kept, true, nil // as Preread parsed it
				}
				return nil, false, nil
			}
		}
	}
	if seen, echo := f.echoOnDisk(); echo {
		f.seen = seen
		if kept != nil {
			return kept, true, nil // as Preread parsed it
		}
		return nil, false, nil
	}
	data, seen, err := f.readSeen(nil)
	if err != nil {
		f.seen = fileIdent{}
		return nil, true, err
	}
	if f.last != nil && equalPieces(data, f.last) {
		f.seen = seen // an echo after all: the file changed back while read
		if kept != nil {
			return kept, true, nil
		}
		return nil, false, nil
	}
	st, err = f.parse(data, seen)
	return st, true, err
}

// parse parses data, read from the file as seen identifies it. The state keeps
// data, which is also last: the file is held once, not copied for the parse.
func (f *StateFile) parse(data []byte, seen fileIdent) (*planspec.State, error) {
	st, err := planspec.ParseStateBytes(data, f.Path)
	if err != nil {
		f.seen = fileIdent{}
		return nil, err
	}
	f.last, f.written, f.seen = [][]byte{data}, fileIdent{}, seen
	return st, nil
}

// equalPieces reports whether data is the pieces joined.
func equalPieces(data []byte, pieces [][]byte) bool {
	for _, p := range pieces {
		if len(data) < len(p) || !bytes.Equal(data[:len(p)], p) {
			return false
		}
		data = data[len(p):]
	}
	return len(data) == 0
}

// readBytes reads the whole file, refusing a FIFO, a device or a directory without
// blocking on it, and a file over StateCap without reading it.
func (f *StateFile) readBytes() ([]byte, error) {
	data, _, err := f.readSeen(nil)
	return data, err
}

// readSeen is readBytes into buf, with the file's ident as one stat found it
// before the read (settledIdent; zero when its times cannot be trusted).
func (f *StateFile) readSeen(buf []byte) ([]byte, fileIdent, error) {
	began := time.Now()
	fi, err := os.Stat(f.Path)
	if err != nil {
		return nil, fileIdent{}, err
	}
	if fi.IsDir() {
		shown := shownPath(f.Path)
		return nil, fileIdent{}, fmt.Errorf("%s is %w: pass %s or the folder with `watch %s`",
			shown, ErrStateIsFolder, filepath.Join(shown, "state.json"), shown)
	}
	if err := regular(f.Path, fi); err != nil {
		return nil, fileIdent{}, err
	}
	data, err := readOpenInto(f.Path, StateCap, buf)
	if err != nil {
		return nil, fileIdent{}, err
	}
	return data, settledIdent(fi, began), nil
}

// Write replaces the file atomically and durably: a temp file in the same
// directory, fsync, rename, fsync of the directory. A reader sees the old content or
// the new, never a mix, and a crash at any instant leaves one of them. The file's
// mode is kept; a symbolic link is refused.
func (f *StateFile) Write(st *planspec.State) error {
	if err := f.WriteVisible(st); err != nil {
		return err
	}
	return f.Sync()
}

// WriteVisible is Write up to the rename: the content is synced and in place for
// every reader, and it survives this process being killed; the folder's fsync,
// which makes the rename itself survive a power cut, is left to Sync. A driver
// launches an agent between the two: an agent dies with the machine, so the
// rename is all its launch needs, and the folder's fsync overlaps its start.
//
// The state is written in the pieces it encodes to: the sections it remembers
// from earlier writes go to the file as they are, not copied into one buffer.
func (f *StateFile) WriteVisible(st *planspec.State) error {
	return f.replace(st.MarshalPieces())
}

// Sync makes the last rename durable: an fsync of the folder, when a write left
// one to do.
func (f *StateFile) Sync() error {
	if !f.unsynced {
		return nil
	}
	f.unsynced = false
	return syncDir(filepath.Dir(f.Path))
}

// Unsynced says whether a write left its folder's fsync to Sync.
func (f *StateFile) Unsynced() bool { return f.unsynced }

// WriteBytes is Write for encoded content.
func (f *StateFile) WriteBytes(data []byte) error {
	if err := f.replace([][]byte{data}); err != nil {
		return err
	}
	return f.Sync()
}

// replace writes the pieces to a temporary file, syncs it and renames it over
// the file.
func (f *StateFile) replace(pieces [][]byte) error {
	fi, lerr := os.Lstat(f.Path)
	if lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("write %s: %w: point stepseq at the real file", f.Path, ErrSymlink)
	}
	size := 0
	for _, p := range pieces {
		size += len(p)
	}
	if size > StateWriteCap {
		return fmt.Errorf("write %s: %w", f.Path, stateTooBig(size))
	}
	dir := filepath.Dir(f.Path)
	f.written, f.kept, f.seen = fileIdent{}, nil, fileIdent{}
	stamp := time.Now().Add(-stampAge).Truncate(time.Microsecond)
	// A large file replaced is held open across the rename, so that its blocks
	// are freed when it is closed, beside the loop, not by the slow rename.
	// O_NONBLOCK: a FIFO put in its place since the Lstat does not block the open.
	var replaced *os.File
	if lerr == nil && fi.Mode().IsRegular() && fi.Size() >= freeLaterFrom {
		replaced, _ = os.OpenFile(f.Path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	}
	if replaced != nil {
		defer func() { go replaced.Close() }()
	}
	if err := replaceFile(f.Path, pieces, stamp); err != nil {
		// The error names renameio's temporary file; the user knows only the folder.
		if _, serr := os.Stat(dir); errors.Is(serr, fs.ErrNotExist) {
			return NoFolder(dir)
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("write %s: %w", f.Path, err)
	}
	f.last, f.unsynced = pieces, true
	// Trusted only where the file system kept the stamp to the microsecond.
	if fi, err := os.Lstat(f.Path); err == nil && fi.ModTime().Equal(stamp) && fi.Size() == int64(size) {
		f.written, _ = identOf(fi)
	}
	return nil
}

// freeLaterFrom is the size from which a state file replaced is closed, and its
// blocks freed, beside the write (see replace).
const freeLaterFrom = 1 << 20

// writebackChunk is how much of a state is written before its writing to the
// disk is started.
const writebackChunk = 2 << 20

// replaceFile writes the pieces to a temporary file in path's folder, stamps
// its modification time, syncs it and renames it over path.
func replaceFile(path string, pieces [][]byte, stamp time.Time) error {
	pf, err := renameio.NewPendingFile(path, renameio.WithTempDir(filepath.Dir(path)), renameio.WithPermissions(0o644), renameio.WithExistingPermissions())
	if err != nil {
		return err
	}
	defer pf.Cleanup()
	// A large state goes to the disk as it is written, a chunk at a time, rather
	// than all at the fsync, which then has little left to wait for.
	var off, kicked int64
	for _, p := range pieces {
		for len(p) > 0 {
			n, err := pf.Write(p[:min(len(p), writebackChunk)])
			if err != nil {
				return err
			}
			p, off = p[n:], off+int64(n)
			if off-kicked >= writebackChunk {
				startWriteback(pf.File, kicked, off-kicked)
				kicked = off
			}
		}
	}
	if err := os.Chtimes(pf.Name(), time.Now(), stamp); err != nil {
		return err
	}
	return pf.CloseAtomicallyReplace()
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// ErrStateTooBig is matched by a state refused for its size: over what stepseq
// reads back (planspec.MaxStateSize), or a plan's fresh state over
// planspec.MaxPlanState at intake.
var ErrStateTooBig = errors.New("state too big")

// StateWriteCap and planStateCap are planspec.MaxStateSize and
// planspec.MaxPlanState; tests lower them.
var StateWriteCap, PlanStateCap = planspec.MaxStateSize, planspec.MaxPlanState

func stateTooBig(size int) error {
	return fmt.Errorf("%w: it would be %s, over the %s that stepseq reads back: the state is kept as it was; split the plan",
		ErrStateTooBig, MiB(size), MiB(StateWriteCap))
}

// MiB says a size in MiB, to a tenth when it is not whole.
func MiB(n int) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// PrereadStates reads and parses the state files of the runs names beside one
// another (Preread), for a loop that then takes them up one at a time: the
// loop finds each state parsed, and parses again only a file that changed since.
func PrereadStates(ws Workspace, names []string) []*StateFile {
	files := make([]*StateFile, len(names))
	inParallel(len(names), func(i int) {
		files[i] = &StateFile{Path: RunStatePath(ws.Dir, names[i])}
		_, _ = files[i].Preread()
	})
	return files
}
