package store

import (
	"bytes"
	"io"
	"os"
	"syscall"
	"time"
)

// echoChunk is how much of the file an echo check holds at once.
const echoChunk = 64 << 10

// echoOnDisk reports whether the file holds what this process last read or
// wrote, comparing it a chunk at a time: an echo of a large state is told
// without holding a second copy of it. seen identifies the file as it was
// stat'ed before the comparison (settledIdent).
func (f *StateFile) echoOnDisk() (seen fileIdent, echo bool) {
	if f.last == nil {
		return fileIdent{}, false
	}
	began := time.Now()
	file, err := os.OpenFile(f.Path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fileIdent{}, false
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != piecesLen(f.last) {
		return fileIdent{}, false
	}
	buf := make([]byte, min(echoChunk, fi.Size()+1))
	for _, p := range f.last {
		for len(p) > 0 {
			n, err := io.ReadFull(file, buf[:min(len(buf), len(p))])
			if err != nil || !bytes.Equal(buf[:n], p[:n]) {
				return fileIdent{}, false
			}
			p = p[n:]
		}
	}
	if n, _ := file.Read(buf[:1]); n != 0 {
		return fileIdent{}, false // it grew while compared
	}
	return settledIdent(fi, began), true
}

func piecesLen(pieces [][]byte) int64 {
	var n int64
	for _, p := range pieces {
		n += int64(len(p))
	}
	return n
}
