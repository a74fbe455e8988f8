package executor

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"

	"github.com/stepseq/stepseq/planspec"
)

// ErrSymlink is returned when the state file is a symbolic link: replacing it would
// cut the link, and writing through it would reach outside the workspace.
var ErrSymlink = errors.New("executor: state file is a symbolic link")

// StateFile is a state.json on disk, read and replaced whole.
type StateFile struct {
	Path string
	// last is the hash of what this process last read or wrote, so that it can tell
	// its own writes from others' and skip parsing an unchanged file.
	last [32]byte
}

// Read parses the file. A missing file returns (nil, fs.ErrNotExist).
func (f *StateFile) Read() (*planspec.State, error) {
	data, err := f.readBytes()
	if err != nil {
		return nil, err
	}
	return f.parse(data)
}

// ReadIfChanged reads the file and parses it only when its content differs from
// what this process last read or wrote: a file event on the state file is often
// the echo of this process's own write. changed is false for that echo.
func (f *StateFile) ReadIfChanged() (st *planspec.State, changed bool, err error) {
	data, err := f.readBytes()
	if err != nil {
		return nil, true, err
	}
	if sha256.Sum256(data) == f.last {
		return nil, false, nil
	}
	st, err = f.parse(data)
	return st, true, err
}

func (f *StateFile) parse(data []byte) (*planspec.State, error) {
	st, err := planspec.ParseState(bytes.NewReader(data), f.Path)
	if err != nil {
		return nil, err
	}
	f.last = sha256.Sum256(data)
	return st, nil
}

// readBytes reads the whole file, refusing a FIFO, a device or a directory without
// blocking on it, and a file over StateCap without reading it.
func (f *StateFile) readBytes() ([]byte, error) {
	return ReadFile(f.Path, StateCap)
}

// Write replaces the file atomically and durably: a temp file in the same
// directory, fsync, rename, fsync of the directory. A reader sees the old content or
// the new, never a mix, and a crash at any instant leaves one of them. The file's
// mode is kept; a symbolic link is refused.
func (f *StateFile) Write(st *planspec.State) error {
	return f.WriteBytes(st.Marshal())
}

// WriteBytes is Write for encoded content.
func (f *StateFile) WriteBytes(data []byte) error {
	if fi, err := os.Lstat(f.Path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("write %s: %w: point stepseq at the real file", f.Path, ErrSymlink)
	}
	dir := filepath.Dir(f.Path)
	if err := renameio.WriteFile(f.Path, data, 0o644, renameio.WithTempDir(dir), renameio.WithExistingPermissions()); err != nil {
		return fmt.Errorf("write %s: %w", f.Path, err)
	}
	f.last = sha256.Sum256(data)
	return syncDir(dir)
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
