package listener

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// deadline bounds every wait in these tests; reaching it is a failure.
const deadline = 10 * time.Second

func serveBounded(t *testing.T, srv *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.Serve(ln).String()
	t.Cleanup(func() { _ = srv.Shutdown(t.Context()) })
	return addr
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.SetDeadline(time.Now().Add(deadline)); err != nil {
		t.Fatal(err)
	}
	return c, bufio.NewReader(c)
}

// closed reports whether the server closed the connection: a read ends in EOF
// (or a reset) before the test's deadline.
func closed(r *bufio.Reader) error {
	for {
		_, err := r.ReadByte()
		var ne net.Error
		switch {
		case err == nil:
			continue
		case errors.Is(err, io.EOF) || strings.Contains(err.Error(), "reset"):
			return nil
		case errors.As(err, &ne) && ne.Timeout():
			return fmt.Errorf("still open after %s", deadline)
		default:
			return err
		}
	}
}

// TestServer_BodyDeadline: a client that sends its headers and then its body
// slowly loses its connection once BodyTimeout has passed, whichever way it
// sends the body; one that sent its body whole may wait for a long answer.
func TestServer_BodyDeadline(t *testing.T) {
	const bodyTimeout = 300 * time.Millisecond
	slow := make(chan struct{})
	srv := &Server{BodyTimeout: bodyTimeout, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if r.URL.Path == "/slow" {
			<-slow // the answer takes longer than the body's bound
		}
		_, _ = io.WriteString(w, "ok")
	})}
	addr := serveBounded(t, srv)
	for _, head := range []string{
		"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{",
		"POST /mcp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n",
	} {
		const conns = 50
		rs := make([]*bufio.Reader, conns)
		for i := range conns {
			c, r := dial(t, addr)
			if _, err := io.WriteString(c, head); err != nil {
				t.Fatal(err)
			}
			rs[i] = r
		}
		for i, r := range rs {
			if err := closed(r); err != nil {
				t.Fatalf("slow body %d (%q): %v", i, head[:30], err)
			}
		}
	}
	// A whole body, then an answer that outlasts the body's bound.
	c, r := dial(t, addr)
	if _, err := io.WriteString(c, "POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(3*bodyTimeout, func() { close(slow) })
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("the long answer was cut: %v", err)
	}
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || string(b) != "ok" {
		t.Fatalf("long answer: %d %q", resp.StatusCode, b)
	}
}

// TestServer_SlowHeaders: headers sent a line at a time are cut off.
func TestServer_SlowHeaders(t *testing.T) {
	srv := &Server{HeaderTimeout: 300 * time.Millisecond, Handler: http.NotFoundHandler()}
	addr := serveBounded(t, srv)
	c, r := dial(t, addr)
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	if err := closed(r); err != nil {
		t.Fatal(err)
	}
}

// TestServer_MaxConns: past MaxConns a connection gets 503 and is closed at
// once; once one leaves, a new one is served.
func TestServer_MaxConns(t *testing.T) {
	srv := &Server{MaxConns: 2, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })}
	addr := serveBounded(t, srv)
	get := func(c net.Conn, r *bufio.Reader) int {
		t.Helper()
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	a, ar := dial(t, addr)
	b, br := dial(t, addr)
	if get(a, ar) != 200 || get(b, br) != 200 {
		t.Fatal("the first two connections were not served")
	}
	c, cr := dial(t, addr)
	resp, err := http.ReadResponse(cr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if body, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "too many connections") {
		t.Fatalf("the third connection got %d %q, want 503", resp.StatusCode, body)
	}
	if err := closed(cr); err != nil {
		t.Fatalf("the refused connection: %v", err)
	}
	_ = c
	a.Close()
	until := time.Now().Add(deadline)
	for srv.Open() > 1 {
		if time.Now().After(until) {
			t.Fatalf("%d connections still counted after one closed", srv.Open())
		}
		time.Sleep(time.Millisecond)
	}
	d, dr := dial(t, addr)
	if code := get(d, dr); code != 200 {
		t.Fatalf("after one left, a new connection got %d", code)
	}
}
