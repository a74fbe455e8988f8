package proc

import (
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// socketPair is a connected pair of unix stream sockets, as the keeper and
// its launcher hold.
func socketPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "socket")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	a, b := conn(fds[0]), conn(fds[1])
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// A launcher that dies with the keeper's answer unread resets the
// connection: the keeper's next read fails, and the keeper hears that its
// launcher is gone rather than crashing while its agent runs.
func TestMsgConn_LauncherGoneWithAnAnswerUnread(t *testing.T) {
	keeperEnd, launcherEnd := socketPair(t)
	k := newMsgConn(keeperEnd)
	m := newMsg(msgStarted, 1)
	m.uint(42)
	if err := k.send(m); err != nil {
		t.Fatal(err)
	}
	launcherEnd.Close()
	if _, _, err := k.next(); err == nil {
		t.Fatal("a read from a launcher that is gone returned a message")
	}
}
