package executor

import (
	"encoding/json"
	"github.com/stepseq/stepseq/executor/core"
	"sync"
	"time"
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
	return j.lines().Append(line)
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
	return j.lines().Close()
}
