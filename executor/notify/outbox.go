package notify

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// record is one line of an outbox segment: a report and its place in the sequence.
type record struct {
	Seq    uint64          `json:"seq"`
	Report json.RawMessage `json:"report"`
}

// segment is one file of the outbox, holding the records from first on.
type segment struct {
	first uint64
	path  string
	size  int64 // bytes of whole records; a reader never reads past it
}

// cursor is where one sink stands: the sequence number of the next report it is
// to deliver, kept in <sink>.cursor as a fixed-width decimal rewritten in place.
type cursor struct {
	next    uint64
	dropped uint64 // reports the cap removed before this sink delivered them
	f       *os.File
	kept    bool // a sink this outbox's notifier does not deliver to (KeepUnlisted)
}

// outbox is the append-only queue of reports on disk, shared by all sinks.
type outbox struct {
	dir      string
	segBytes int64
	maxBytes int64

	mu       sync.Mutex
	segs     []segment // oldest first; the last is the one appended to
	active   *os.File
	unsynced bool   // records appended to active since its last fsync
	next     uint64 // sequence number of the next record
	// visible is the first record no sink may deliver yet: held, a record
	// waits for publish (the state write that holds what it says).
	visible uint64
	held    bool
	total   int64
	cursors map[string]*cursor
	ids     idSource
	changed chan struct{} // closed and replaced whenever a cursor moves
}

const (
	segmentSuffix = ".jsonl"
	cursorSuffix  = ".cursor"
	cursorWidth   = 20
)

func segmentName(first uint64) string { return fmt.Sprintf("%020d%s", first, segmentSuffix) }

// openOutbox opens the outbox in dir, creating it if need be, with a cursor for
// each sink. A sink without a cursor starts at the end: it hears what comes next,
// not the past. A record cut short by a crash is removed. Cursors of sinks no
// longer configured are removed, so that they never hold segments; with keep,
// they are opened as they are, and hold the segments they have yet to deliver.
func openOutbox(dir string, segBytes, maxBytes int64, sinks []string, keep bool) (*outbox, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	o := &outbox{dir: dir, segBytes: segBytes, maxBytes: maxBytes, next: 1, cursors: map[string]*cursor{},
		changed: make(chan struct{})}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	var stale, kept []string
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, segmentSuffix):
			first, err := strconv.ParseUint(strings.TrimSuffix(name, segmentSuffix), 10, 64)
			if err != nil || !e.Type().IsRegular() {
				continue
			}
			info, err := e.Info()
			if err != nil {
				return nil, fmt.Errorf("outbox: %w", err)
			}
			o.segs = append(o.segs, segment{first: first, path: filepath.Join(dir, name), size: info.Size()})
		case strings.HasSuffix(name, cursorSuffix):
			switch id := strings.TrimSuffix(name, cursorSuffix); {
			case slices.Contains(sinks, id):
			case keep:
				kept = append(kept, id)
			default:
				stale = append(stale, filepath.Join(dir, name))
			}
		}
	}
	slices.SortFunc(o.segs, func(a, b segment) int { return cmpUint(a.first, b.first) })
	if err := o.recoverTail(); err != nil {
		return nil, err
	}
	for _, s := range o.segs {
		o.total += s.size
	}
	for _, name := range append(slices.Clone(sinks), kept...) {
		if err := o.openCursor(name); err != nil {
			o.close()
			return nil, err
		}
	}
	for _, name := range kept {
		o.cursors[name].kept = true
	}
	for _, p := range stale {
		_ = os.Remove(p)
	}
	o.compact()
	o.visible = o.next // what an earlier notifier recorded is past its write
	return o, nil
}

// published is the first record the sinks may not deliver yet: the end of
// the outbox when nothing is held.
func (o *outbox) published() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.visible
}

// holdFrom keeps the records from seq on from the sinks until publish, as
// the notifier this one replaces held them; only a held outbox holds.
func (o *outbox) holdFrom(seq uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.held && seq < o.visible {
		o.visible = seq
	}
}

// publish lets the sinks deliver every record appended so far.
func (o *outbox) publish() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.visible = o.next
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// recoverTail cuts a partial record off the last segment, learns the next sequence
// number and the last ID from it, and opens it for appending.
func (o *outbox) recoverTail() error {
	if len(o.segs) == 0 {
		return nil
	}
	last := &o.segs[len(o.segs)-1]
	f, err := openFile(last.path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	o.next = last.first
	var whole int64 // bytes of whole records
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, readChunk), maxRecordBytes)
	sc.Split(scanLines)
	for sc.Scan() {
		line := sc.Bytes()
		whole += int64(len(line)) + 1
		var rec record
		if json.Unmarshal(line, &rec) != nil || rec.Seq < o.next {
			continue
		}
		o.next = rec.Seq + 1
		var r struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(rec.Report, &r) == nil {
			o.ids.observe(r.ID)
		}
	}
	// A scan error (a read error, a line past maxRecordBytes) ends the segment
	// where the scan stopped, as a partial record does.
	if whole < last.size {
		if err := f.Truncate(whole); err != nil {
			f.Close()
			return fmt.Errorf("outbox: cut partial record: %w", err)
		}
	}
	last.size = whole
	o.active = f
	return nil
}

// scanLines splits whole lines only: a last line without its newline is a record
// cut short, not a record.
func scanLines(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF {
		return len(data), nil, bufio.ErrFinalToken
	}
	return 0, nil, nil
}

// maxRecordBytes bounds one outbox line: a report with every field at its cap and
// every byte escaped (\u0000 is six bytes for one) fits with room to spare.
const maxRecordBytes = 128 << 10

// openFile opens a file of stepseq's own without following a symlink or blocking
// on a FIFO that someone put in its place, and refuses anything but a regular file.
func openFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	return f, nil
}

func (o *outbox) openCursor(name string) error {
	path := filepath.Join(o.dir, name+cursorSuffix)
	f, err := openFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("outbox cursor: %w", err)
	}
	var buf [cursorWidth + 1]byte
	n, _ := f.ReadAt(buf[:], 0)
	c := &cursor{f: f}
	next, err := strconv.ParseUint(strings.TrimSpace(string(buf[:n])), 10, 64)
	if err != nil || next > o.next {
		// A new sink, or a cursor ahead of a tail that a machine crash lost.
		c.next = o.next
		o.cursors[name] = c
		o.saveCursor(c)
		if err := f.Sync(); err != nil {
			return fmt.Errorf("outbox cursor: %w", err)
		}
		return syncDir(o.dir)
	}
	c.next = next
	o.cursors[name] = c
	return nil
}

// saveCursor rewrites the cursor in place. It is not synced: a cursor lost to a
// machine crash only repeats deliveries, which receivers drop by ID.
func (o *outbox) saveCursor(c *cursor) {
	b := fmt.Appendf(nil, "%0*d\n", cursorWidth, c.next)
	_, _ = c.f.WriteAt(b, 0)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ErrClosed is returned by Emit after Close.
var ErrClosed = errors.New("notify: notifier closed")

// append stamps r with an ID (and a time, when it has none) and writes it as the
// next record. It is on disk once sync returns: a driver syncs once per input,
// with the state's folder, rather than once per report.
func (o *outbox) append(r Notice, now time.Time) (Notice, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cursors == nil {
		return r, ErrClosed
	}
	if r.Time.IsZero() {
		r.Time = now
	}
	r.Time = r.Time.UTC() // as it reads back from JSON
	if r.ID == "" {
		r.ID = o.ids.next(now)
	}
	body, err := json.Marshal(r)
	if err != nil {
		return r, fmt.Errorf("outbox: %w", err)
	}
	line, err := json.Marshal(record{Seq: o.next, Report: body})
	if err != nil {
		return r, fmt.Errorf("outbox: %w", err)
	}
	line = append(line, '\n')
	if o.active == nil || (o.segs[len(o.segs)-1].size > 0 && o.segs[len(o.segs)-1].size+int64(len(line)) > o.segBytes) {
		if err := o.rotate(); err != nil {
			return r, err
		}
	}
	last := &o.segs[len(o.segs)-1]
	n, err := o.active.Write(line)
	if err != nil {
		// Cut what was written, so that the next record starts on a line.
		_ = o.active.Truncate(last.size)
		return r, fmt.Errorf("outbox: %w", err)
	}
	last.size += int64(n)
	o.total += int64(n)
	o.next++
	if !o.held {
		o.visible = o.next
	}
	o.unsynced = true
	o.enforceCap()
	return r, nil
}

// sync makes the records appended so far durable.
func (o *outbox) sync() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.syncActive()
}

func (o *outbox) syncActive() error {
	if !o.unsynced || o.active == nil {
		return nil
	}
	if err := o.active.Sync(); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	o.unsynced = false
	return nil
}

// rotate starts a new segment with the next record, once the one before is on
// disk.
func (o *outbox) rotate() error {
	if err := o.syncActive(); err != nil {
		return err
	}
	path := filepath.Join(o.dir, segmentName(o.next))
	f, err := openFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	if err := syncDir(o.dir); err != nil {
		f.Close()
		return fmt.Errorf("outbox: %w", err)
	}
	if o.active != nil {
		o.active.Close()
	}
	o.active = f
	o.segs = append(o.segs, segment{first: o.next, path: path})
	o.compact()
	return nil
}

// enforceCap drops the oldest segments while the outbox is over its cap. The
// segment being appended to is never dropped.
func (o *outbox) enforceCap() {
	for o.total > o.maxBytes && len(o.segs) > 1 {
		end := o.segs[1].first
		for _, c := range o.cursors {
			if c.next < end {
				c.dropped += end - c.next
				c.next = end
				o.saveCursor(c)
			}
		}
		o.removeOldest()
	}
}

// compact deletes the segments every sink has passed.
func (o *outbox) compact() {
	low := o.next
	for _, c := range o.cursors {
		low = min(low, c.next)
	}
	for len(o.segs) > 1 && o.segs[1].first <= low {
		o.removeOldest()
	}
}

func (o *outbox) removeOldest() {
	_ = os.Remove(o.segs[0].path)
	o.total -= o.segs[0].size
	o.segs = o.segs[1:]
}

// done records that sink delivered (or gave up) the record seq.
func (o *outbox) done(sink string, seq uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.cursors[sink]
	if c == nil || seq < c.next {
		return
	}
	c.next = seq + 1
	o.saveCursor(c)
	if len(o.segs) > 1 && c.next >= o.segs[1].first {
		o.compact()
	}
	close(o.changed)
	o.changed = make(chan struct{})
}

// behind is how many reports the sink furthest behind has yet to deliver, and a
// channel closed when that may have changed. A kept cursor is no sink here: its
// backlog waits for a notifier that delivers to it.
func (o *outbox) behind() (uint64, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var most uint64
	for _, c := range o.cursors {
		if !c.kept {
			most = max(most, o.next-c.next)
		}
	}
	return most, o.changed
}

// bytes is the outbox's size on disk.
func (o *outbox) bytes() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.total
}

// nextSeq is the sequence number of the next record appended.
func (o *outbox) nextSeq() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.next
}

// passed says whether sink's cursor is at or past seq.
func (o *outbox) passed(sink string, seq uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.cursors[sink]
	return c != nil && c.next >= seq
}

// pending is how many reports sink has yet to deliver.
func (o *outbox) pending(sink string) uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	if c := o.cursors[sink]; c != nil {
		return o.next - c.next
	}
	return 0
}

func (o *outbox) close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	err := o.syncActive()
	if o.active != nil {
		err = errors.Join(err, o.active.Close())
		o.active = nil
	}
	for _, c := range o.cursors {
		c.f.Close()
	}
	o.cursors = nil
	return err
}

// readChunk is what a reader reads at a time; a longer record grows the buffer.
const readChunk = 64 << 10

// reader is one sink's position in the outbox files.
type reader struct {
	sink     string
	f        *os.File
	segFirst uint64
	off      int64  // file offset of the next record
	buf      []byte // file bytes from bufOff
	bufOff   int64
}

func (rd *reader) close() {
	if rd.f != nil {
		rd.f.Close()
		rd.f = nil
	}
}

// read returns the next record for rd's sink, and how many reports the cap
// dropped before it since the last call. ok is false when the sink is up to date.
func (o *outbox) read(rd *reader) (rec record, dropped uint64, ok bool, err error) {
	for {
		c, want, seg, nextFirst, due, err := o.locate(rd.sink, &dropped)
		if err != nil || !due {
			return rec, dropped, false, err
		}
		if rd.f == nil || rd.segFirst != seg.first {
			err := rd.open(seg)
			if errors.Is(err, fs.ErrNotExist) && nextFirst != 0 {
				// Gone: the cap dropped it meanwhile (and moved the cursor), or
				// someone removed it. Either way its reports are past.
				o.skip(c, nextFirst, true)
				continue
			}
			if err != nil {
				return rec, dropped, false, fmt.Errorf("outbox: %w", err)
			}
		}
		rec, ok, err = rd.next(seg, want)
		if ok || err != nil {
			return rec, dropped, ok, err
		}
		if nextFirst == 0 {
			return rec, dropped, false, nil
		}
		o.skip(c, nextFirst, false) // the segment is read to its end: whatever it lacked is past
	}
}

// locate finds, under the lock, the sink's cursor, the record it wants next and
// the segment that holds it, with the first record of the segment after (0: it
// is the last). It adds what the cap dropped to *dropped. due is false when the
// sink is up to date; a sink that is gone is ErrClosed.
func (o *outbox) locate(sink string, dropped *uint64) (c *cursor, want uint64, seg segment, nextFirst uint64, due bool, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c = o.cursors[sink]
	if c == nil {
		return nil, 0, segment{}, 0, false, ErrClosed
	}
	*dropped += c.dropped
	c.dropped = 0
	want = c.next
	if want >= o.visible || len(o.segs) == 0 {
		return c, want, segment{}, 0, false, nil
	}
	i := len(o.segs) - 1
	for i > 0 && o.segs[i].first > want {
		i--
	}
	if i+1 < len(o.segs) {
		nextFirst = o.segs[i+1].first
	}
	return c, want, o.segs[i], nextFirst, true, nil
}

// skip moves the cursor on to the segment that begins at first; dropped counts
// the reports skipped as the cap's.
func (o *outbox) skip(c *cursor, first uint64, dropped bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if c.next < first {
		if dropped {
			c.dropped += first - c.next
		}
		c.next = first
	}
}

// open makes seg the segment rd reads, from its start.
func (rd *reader) open(seg segment) error {
	rd.close()
	f, err := openFile(seg.path, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	rd.f, rd.segFirst, rd.off, rd.buf, rd.bufOff = f, seg.first, 0, rd.buf[:0], 0
	return nil
}

// next is the segment's next record at or after want; ok is false at the
// segment's end, or where it is damaged (nothing after can be read).
func (rd *reader) next(seg segment, want uint64) (rec record, ok bool, err error) {
	for rd.off < seg.size {
		line, err := rd.line(seg.size)
		if errors.Is(err, io.ErrUnexpectedEOF) {
			rd.off = seg.size
			return rec, false, nil
		}
		if err != nil {
			return rec, false, fmt.Errorf("outbox: %w", err)
		}
		rd.off += int64(len(line)) + 1
		if json.Unmarshal(line, &rec) != nil || rec.Seq < want {
			continue
		}
		return rec, true, nil
	}
	return rec, false, nil
}

// line returns the record at rd.off, without its newline, reading no further than
// size.
func (rd *reader) line(size int64) ([]byte, error) {
	for {
		if start := rd.off - rd.bufOff; start >= 0 && start < int64(len(rd.buf)) {
			if i := bytes.IndexByte(rd.buf[start:], '\n'); i >= 0 {
				return rd.buf[start : start+int64(i)], nil
			}
		}
		want := int64(readChunk)
		if start := rd.off - rd.bufOff; start >= 0 && start < int64(len(rd.buf)) {
			want = max(want, 2*(int64(len(rd.buf))-start))
		}
		want = min(want, size-rd.off)
		if want <= 0 {
			return nil, io.ErrUnexpectedEOF
		}
		if int64(cap(rd.buf)) < want {
			rd.buf = make([]byte, want)
		}
		rd.buf = rd.buf[:want]
		n, err := rd.f.ReadAt(rd.buf, rd.off)
		rd.buf, rd.bufOff = rd.buf[:n], rd.off
		if n < int(want) {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if int64(n) == size-rd.off && bytes.IndexByte(rd.buf, '\n') < 0 {
			return nil, io.ErrUnexpectedEOF
		}
	}
}
