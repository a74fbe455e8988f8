package store

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/stepseq/stepseq/executor/core"
)

// DefaultLogCap is how much of one try's output its log keeps.
const DefaultLogCap = 64 << 20

// logTailCap bounds the tail of a log over its cap, which is held in memory until
// the try ends: the rest of the cap is the head, written as it comes.
const logTailCap = 1 << 20

// TryHeader is what a try's log says first: which try, how it was started, when.
type TryHeader struct {
	Step    string
	Try     int
	Argv    []string
	Started time.Time
}

// TryLog is the log of one try, .stepseq/logs/<step>/<try>.log: a header, the
// agent's output, and a footer with its exit and duration. It is created on the
// first byte of output, or when the try ends. Output over the cap keeps its head
// and its tail, with a marker line where the middle was cut.
//
// A TryLog never fails its writer: the agent's pipes must not depend on the disk.
// The first error (a full disk, a read-only folder) stops the log and is kept for
// Finish to return, once.
type TryLog struct {
	path string
	hdr  TryHeader
	head int64 // output bytes the head keeps
	keep int   // output bytes the tail keeps

	mu       sync.Mutex
	f        *os.File
	err      error
	written  int64  // output bytes written to the head
	tail     []byte // ring of the latest output once the head is full; made then
	tailAt   int    // next write position in tail
	tailSeen int64  // output bytes that went to the ring
	last     byte   // last byte written to the file
	finished bool
}

// OpenTryLog prepares the log at path; nothing is created until there is output. maxBytes caps the output kept; 0 means DefaultLogCap.
func OpenTryLog(path string, hdr TryHeader, maxBytes int64) *TryLog {
	if maxBytes <= 0 {
		maxBytes = DefaultLogCap
	}
	tail := min(maxBytes/2, logTailCap)
	return &TryLog{path: path, hdr: hdr, head: maxBytes - tail, keep: int(tail)}
}

// Write logs b. It always reports the whole of b written and no error.
func (l *TryLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(b)
	if l.finished || !l.open() {
		return n, nil
	}
	if room := l.head - l.written; room > 0 {
		k := int(min(room, int64(len(b))))
		if !l.write(b[:k]) {
			return n, nil
		}
		l.written += int64(k)
		b = b[k:]
	}
	if len(b) > 0 {
		l.keepTail(b)
	}
	return n, nil
}

// keepTail puts b in the ring of the latest output, over its oldest bytes.
func (l *TryLog) keepTail(b []byte) {
	l.tailSeen += int64(len(b))
	if l.tail == nil {
		l.tail = make([]byte, 0, l.keep)
	}
	if len(l.tail) < cap(l.tail) { // the ring is filling up
		k := min(len(b), cap(l.tail)-len(l.tail))
		l.tail = append(l.tail, b[:k]...)
		b = b[k:]
	}
	if len(b) > len(l.tail) {
		b = b[len(b)-len(l.tail):]
	}
	for len(b) > 0 {
		k := copy(l.tail[l.tailAt:], b)
		l.tailAt = (l.tailAt + k) % len(l.tail)
		b = b[k:]
	}
}

// open creates the log and writes its header, once; false when the log is lost.
func (l *TryLog) open() bool {
	if l.f != nil || l.err != nil {
		return l.err == nil
	}
	if err := os.MkdirAll(filepath.Dir(l.path), 0o755); err != nil {
		l.err = fmt.Errorf("agent log: %w", err)
		return false
	}
	// O_NOFOLLOW and O_NONBLOCK: a link or a FIFO put where the log goes is
	// refused, not written through nor waited on.
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		l.err = fmt.Errorf("agent log: %w", err)
		return false
	}
	fi, err := f.Stat()
	if err == nil {
		err = regular(l.path, fi)
	}
	if err != nil {
		f.Close()
		l.err = fmt.Errorf("agent log: %w", err)
		return false
	}
	l.f = f
	var b strings.Builder
	if fi.Size() > 0 {
		b.WriteString("\n") // an earlier run of the same try number is above
	}
	fmt.Fprintf(&b, "=== stepseq: step %s, try %d, started %s\n", l.hdr.Step, l.hdr.Try, l.hdr.Started.UTC().Format(time.RFC3339Nano))
	fmt.Fprintf(&b, "=== agent: %s\n", quoteArgv(l.hdr.Argv))
	return l.write([]byte(b.String()))
}

// Write writes b to the file, or remembers why it could not.
func (l *TryLog) write(b []byte) bool {
	if len(b) == 0 {
		return true
	}
	if _, err := l.f.Write(b); err != nil {
		l.err = fmt.Errorf("agent log: %w", err)
		return false
	}
	l.last = b[len(b)-1]
	return true
}

// Finish writes the kept tail, with a marker where output was cut, and the
// footer, and closes the log. It returns the first error the log met, if any,
// and nil on every later call.
func (l *TryLog) Finish(exit core.Exit) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.finished {
		return nil
	}
	l.finished = true
	// A try that printed nothing leaves no log: creating a file is the slowest
	// part of a short step on many filesystems, and `stepseq logs` says so.
	if l.f != nil && l.open() {
		if cut := l.tailSeen - int64(len(l.tail)); cut > 0 {
			l.line(fmt.Sprintf("=== stepseq: %d bytes of output cut here: the log keeps the first %s and the last %s",
				cut, sizeString(l.head), sizeString(int64(l.keep))))
		}
		ok := l.write(l.tail[l.tailAt:]) && l.write(l.tail[:l.tailAt])
		if ok {
			l.line("=== stepseq: " + describeExit(exit))
		}
	}
	l.tail = nil
	if l.f != nil {
		if err := l.f.Close(); err != nil && l.err == nil {
			l.err = fmt.Errorf("agent log: %w", err)
		}
		l.f = nil
	}
	return l.err
}

// line writes s on a line of its own.
func (l *TryLog) line(s string) bool {
	if l.last != '\n' {
		s = "\n" + s
	}
	return l.write([]byte(s + "\n"))
}

// describeExit says how a try ended, for its log's footer.
func describeExit(e core.Exit) string {
	took := e.Ended.Sub(e.Started).Round(time.Millisecond)
	var how string
	switch {
	case e.Signal != nil:
		how = "killed by " + signalName(e.Signal)
	case e.Code < 0 && e.Err != nil:
		how = "did not run: " + e.Err.Error()
	default:
		how = "exit " + strconv.Itoa(e.Code)
	}
	if e.TimedOut {
		how += ", timed out"
	}
	return fmt.Sprintf("%s after %s", how, took)
}

func signalName(sig os.Signal) string {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return sig.String()
	}
	switch s {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGABRT:
		return "SIGABRT"
	}
	return fmt.Sprintf("signal %d (%s)", int(s), s)
}

// quoteArgv writes argv as a shell would read it back: plain words as they are,
// others in single quotes, and any with control characters Go-quoted.
func quoteArgv(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		switch {
		case a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=@%+,-") == "":
			out[i] = a
		case strings.ContainsFunc(a, func(r rune) bool { return r < ' ' || r == 0x7f }):
			out[i] = strconv.Quote(a)
		default:
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}
