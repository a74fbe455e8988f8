package store

import (
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/stepseq/stepseq/executor/core"
)

// DefaultJournalMax is the size at which the journal rotates to journal.jsonl.1.
const DefaultJournalMax = 8 << 20

// Journal is the append-only decision log, .stepseq/journal.jsonl, bounded in size:
// past Max bytes the file becomes journal.jsonl.1 and a new one starts. Each
// record is whole in the file or absent (see LineLog).
type Journal struct {
	Path string
	Max  int64

	once sync.Once
	log  LineLog

	mu      sync.Mutex
	held    bool   // Hold: records wait in pending for Flush
	pending []byte // whole lines
}

// Record appends e, stamping its time. A journal that cannot be written never
// stops the plan: the error is returned for the caller to log.
func (j *Journal) Record(e core.Entry) error {
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
	if j.held {
		j.pending = append(j.pending, line...)
		return nil
	}
	return j.lines().Append(line)
}

// Hold keeps the records that follow in memory until Flush appends them in one
// Write: a run taken up writes its first records as one, where each would be a
// Write of its own. Each record stays a whole line.
func (j *Journal) Hold() {
	if j == nil {
		return
	}
	j.mu.Lock()
	j.held = true
	j.mu.Unlock()
}

// Flush appends the records held since Hold, and records go to the file at
// once again.
func (j *Journal) Flush() error {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.held = false
	if len(j.pending) == 0 {
		return nil
	}
	lines := j.pending
	j.pending = nil
	return j.lines().Append(lines)
}

func (j *Journal) lines() *LineLog {
	j.once.Do(func() {
		max := j.Max
		if max <= 0 {
			max = DefaultJournalMax
		}
		j.log.Path, j.log.Max = j.Path, max
	})
	return &j.log
}

// Close closes the journal file.
func (j *Journal) Close() error {
	if j == nil {
		return nil
	}
	return errors.Join(j.Flush(), j.lines().Close())
}
