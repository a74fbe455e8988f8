package executor

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// DefaultJournalMax is the size at which the journal rotates to journal.jsonl.1.
const DefaultJournalMax = 8 << 20

// Entry is one self-describing journal record: what happened, why, to which step.
type Entry struct {
	Time   string         `json:"time"`
	Event  string         `json:"event"` // e.g. decide, launch, exit, write, trigger, plan
	Step   string         `json:"step,omitempty"`
	Try    int            `json:"try,omitempty"`
	Reason string         `json:"reason,omitempty"`
	Detail map[string]any `json:"detail,omitempty"`
}

// Journal is the append-only decision log, .stepseq/journal.jsonl, bounded in size:
// past Max bytes the file becomes journal.jsonl.1 and a new one starts.
type Journal struct {
	Path string
	Max  int64

	mu   sync.Mutex
	f    *os.File
	size int64
}

// Record appends e, stamping its time. A journal that cannot be written never
// stops the plan: the error is returned for the caller to log.
func (j *Journal) Record(e Entry) error {
	if j == nil {
		return nil
	}
	if e.Time == "" {
		e.Time = time.Now().UTC().Format(time.RFC3339Nano)
	}
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.open(); err != nil {
		return err
	}
	max := j.Max
	if max <= 0 {
		max = DefaultJournalMax
	}
	if j.size+int64(len(line)) > max && j.size > 0 {
		j.f.Close()
		j.f = nil
		if err := os.Rename(j.Path, j.Path+".1"); err != nil {
			return err
		}
		if err := j.open(); err != nil {
			return err
		}
	}
	n, err := j.f.Write(line)
	j.size += int64(n)
	return err
}

func (j *Journal) open() error {
	if j.f != nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(j.Path), 0o755); err != nil {
		return err
	}
	// O_NONBLOCK: a FIFO put in the journal's place fails the open instead of
	// waiting for a reader.
	f, err := os.OpenFile(j.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err == nil {
		err = regular(j.Path, fi)
	}
	if err != nil {
		f.Close()
		return err
	}
	j.f, j.size = f, fi.Size()
	return nil
}

// Close closes the journal file.
func (j *Journal) Close() error {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	return err
}
