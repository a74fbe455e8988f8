package proc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"

	"golang.org/x/sys/unix"
)

// The keeper and the stepseq that launches through it talk over a unix stream
// socket pair in frames: a 4-byte length, then a message, the descriptors it
// passes (SCM_RIGHTS) sent with its first byte. A stream has no message size
// bound (an agent's prompt is one of its arguments, up to 128 KiB); the kernel
// never joins bytes that carry descriptors to bytes read before them.

// The messages. From the launcher: launch a try's agent, note that stepseq
// stops it or it timed out (the record says so should stepseq die before it
// reaps), and the try judged (what the keeper cannot attribute holds it no
// more). From the keeper: ready (it is one), started, failed to start, exited.
const (
	msgLaunch  = 'L'
	msgNote    = 'N'
	msgJudged  = 'J'
	msgReady   = 'R'
	msgStarted = 'S'
	msgFailed  = 'F'
	msgExited  = 'E'
)

const (
	noteStopped  = 1
	noteTimedOut = 2
)

// maxKeptFiles bounds the descriptors a launch passes: the agent's output, its
// error stream, its try lock and the files it inherits.
const maxKeptFiles = 16

// maxFrame bounds a message: argv and environment together are bounded by the
// kernel well below it.
const maxFrame = 64 << 20

// msg builds a message.
type msg struct{ b []byte }

func newMsg(kind byte, id uint64) *msg {
	m := &msg{b: make([]byte, 4, 256)}
	m.b = append(m.b, kind)
	m.uint(id)
	return m
}

func (m *msg) uint(v uint64) { m.b = binary.AppendUvarint(m.b, v) }
func (m *msg) int(v int64)   { m.b = binary.AppendVarint(m.b, v) }
func (m *msg) str(s string)  { m.uint(uint64(len(s))); m.b = append(m.b, s...) }
func (m *msg) strs(ss []string) {
	m.uint(uint64(len(ss)))
	for _, s := range ss {
		m.str(s)
	}
}

// frame is the message with its length in front.
func (m *msg) frame() []byte {
	binary.LittleEndian.PutUint32(m.b, uint32(len(m.b)-4))
	return m.b
}

// msgReader reads a message's fields in order; a field past its end or
// malformed leaves err set and zero values.
type msgReader struct {
	b   []byte
	err error
}

var errBadMsg = errors.New("keeper: malformed message")

func (r *msgReader) uint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errBadMsg
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *msgReader) int() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errBadMsg
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *msgReader) str() string {
	n := r.uint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = errBadMsg
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *msgReader) strs() []string {
	n := r.uint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = errBadMsg
		return nil
	}
	ss := make([]string, 0, n)
	for range n {
		ss = append(ss, r.str())
	}
	return ss
}

// msgConn is one end of the socket pair: the launcher's, read through Go's
// poller by a goroutine of its own, or the keeper's (c nil), a blocking
// descriptor its loop polls with the agents' pidfds, so that a request or an
// agent's end wakes the one thread that acts on it and no other.
type msgConn struct {
	c   *net.UnixConn
	fd  int        // the keeper's end, when c is nil
	wmu sync.Mutex // one message at a time

	// Read by one goroutine only.
	buf  []byte // bytes read and not yet a whole frame
	fds  []int  // descriptors received and not yet taken
	rbuf []byte
	oob  []byte
}

func newMsgConn(c *net.UnixConn) *msgConn {
	return &msgConn{c: c, fd: -1, rbuf: make([]byte, 64<<10), oob: make([]byte, unix.CmsgSpace(4*maxKeptFiles))}
}

// newRawMsgConn is the keeper's end over its blocking descriptor fd.
func newRawMsgConn(fd int) *msgConn {
	c := newMsgConn(nil)
	c.fd = fd
	return c
}

// send writes m, with files' descriptors passed along.
func (c *msgConn) send(m *msg, fds ...int) error {
	b := m.frame()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if c.c != nil {
		n, _, err := c.c.WriteMsgUnix(b, oob, nil)
		if err == nil && n < len(b) {
			_, err = c.c.Write(b[n:]) // a stream may take a long message in parts
		}
		return err
	}
	for len(b) > 0 {
		n, err := unix.SendmsgN(c.fd, b, oob, nil, unix.MSG_NOSIGNAL)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		b, oob = b[n:], nil
	}
	return nil
}

// next returns the next message: its kind, its fields, and the descriptors
// that came with it when it says how many (take).
func (c *msgConn) next() (byte, *msgReader, error) {
	for {
		kind, r, ok, err := c.pop()
		if ok || err != nil {
			return kind, r, err
		}
		if err := c.fill(0); err != nil {
			return 0, nil, err
		}
	}
}

// pop takes the next whole message read so far; ok is false when none is.
func (c *msgConn) pop() (kind byte, r *msgReader, ok bool, err error) {
	if len(c.buf) < 4 {
		return 0, nil, false, nil
	}
	n := int(binary.LittleEndian.Uint32(c.buf))
	if n < 1 || n > maxFrame {
		return 0, nil, false, fmt.Errorf("keeper: frame of %d bytes", n)
	}
	if len(c.buf) < 4+n {
		return 0, nil, false, nil
	}
	body := append([]byte(nil), c.buf[4:4+n]...)
	c.buf = append(c.buf[:0], c.buf[4+n:]...)
	return body[0], &msgReader{b: body[1:]}, true, nil
}

// fill reads what the other end sent, once (flags: MSG_DONTWAIT on the
// keeper's blocking descriptor, for a read its poll said is ready).
func (c *msgConn) fill(flags int) error {
	var n, oobn int
	var err error
	if c.c != nil {
		n, oobn, _, _, err = c.c.ReadMsgUnix(c.rbuf, c.oob)
	} else {
		n, oobn, _, _, err = unix.Recvmsg(c.fd, c.rbuf, c.oob, flags|unix.MSG_CMSG_CLOEXEC)
	}
	if oobn > 0 {
		c.fds = append(c.fds, rights(c.oob[:oobn])...)
	}
	// A failed read may count -1 bytes: a launcher that died with a message
	// of the keeper's unread resets the connection.
	if n > 0 {
		c.buf = append(c.buf, c.rbuf[:n]...)
	}
	if err != nil {
		return err
	}
	if n == 0 {
		return errors.New("keeper: connection closed")
	}
	return nil
}

// take hands over the first n descriptors received.
func (c *msgConn) take(n int) ([]int, error) {
	if n > len(c.fds) {
		return nil, fmt.Errorf("keeper: %d descriptors announced, %d received", n, len(c.fds))
	}
	fds := c.fds[:n:n]
	c.fds = c.fds[n:]
	return fds, nil
}

// rights are the descriptors a control message carries.
func rights(oob []byte) []int {
	cmsgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, cm := range cmsgs {
		if r, err := unix.ParseUnixRights(&cm); err == nil {
			fds = append(fds, r...)
		}
	}
	return fds
}

func (c *msgConn) close() error {
	if c.c != nil {
		return c.c.Close()
	}
	return unix.Close(c.fd)
}
