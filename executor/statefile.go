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
	// last is the fingerprint of what this process last read or wrote, so that it
	// can tell its own writes from others' and skip re-reading an unchanged file.
	last Fingerprint
}

// Fingerprint identifies one version of the file's content.
type Fingerprint struct {
	Hash [32]byte
	Size int64
	Mod  int64 // modification time, ns
	Ino  uint64
}

func fingerprintOf(fi fs.FileInfo, data []byte) Fingerprint {
	fp := Fingerprint{Size: fi.Size(), Mod: fi.ModTime().UnixNano(), Ino: inode(fi)}
	if data != nil {
		fp.Hash = sha256.Sum256(data)
	}
	return fp
}

// Read parses the file. A missing file returns (nil, fs.ErrNotExist).
func (f *StateFile) Read() (*planspec.State, error) {
	data, fi, err := f.readBytes()
	if err != nil {
		return nil, err
	}
	st, err := planspec.ParseState(bytes.NewReader(data), f.Path)
	if err != nil {
		return nil, err
	}
	f.last = fingerprintOf(fi, data)
	return st, nil
}

func (f *StateFile) readBytes() ([]byte, fs.FileInfo, error) {
	file, err := os.Open(f.Path)
	if err != nil {
		return nil, nil, err
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return nil, nil, err
	}
	if fi.Size() > planspec.MaxStateSize {
		return nil, nil, fmt.Errorf("%s: larger than %d MiB: not a state file", f.Path, planspec.MaxStateSize>>20)
	}
	data := make([]byte, 0, fi.Size()+512)
	buf := bytes.NewBuffer(data)
	if _, err := buf.ReadFrom(file); err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", f.Path, err)
	}
	return buf.Bytes(), fi, nil
}

// ReadIfChanged reads the file and parses it only when its content differs from
// what this process last read or wrote: a file event on the state file is often
// the echo of this process's own write. changed is false for that echo.
func (f *StateFile) ReadIfChanged() (st *planspec.State, changed bool, err error) {
	data, fi, err := f.readBytes()
	if err != nil {
		return nil, true, err
	}
	if sha256.Sum256(data) == f.last.Hash {
		return nil, false, nil
	}
	st, err = planspec.ParseState(bytes.NewReader(data), f.Path)
	if err != nil {
		return nil, true, err
	}
	f.last = fingerprintOf(fi, data)
	return st, true, nil
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
	pf, err := renameio.NewPendingFile(f.Path, renameio.WithTempDir(dir), renameio.WithPermissions(0o644), renameio.WithExistingPermissions())
	if err != nil {
		return fmt.Errorf("write %s: %w", f.Path, err)
	}
	defer pf.Cleanup()
	if _, err := pf.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", f.Path, err)
	}
	// The fingerprint comes from the new file itself, before it takes the name: a
	// writer that replaces it right after the rename must not pass for this one.
	fi, err := pf.Stat()
	if err != nil {
		return fmt.Errorf("write %s: %w", f.Path, err)
	}
	if err := pf.CloseAtomicallyReplace(); err != nil {
		return fmt.Errorf("write %s: %w", f.Path, err)
	}
	f.last = fingerprintOf(fi, data)
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
