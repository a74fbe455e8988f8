package listener

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
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

// resolveTo is a resolver that answers every name with ips.
func resolveTo(ips ...string) func(context.Context, string) ([]netip.Addr, error) {
	return func(context.Context, string) ([]netip.Addr, error) {
		var out []netip.Addr
		for _, ip := range ips {
			out = append(out, netip.MustParseAddr(ip))
		}
		return out, nil
	}
}

// misreported is a loopback listener that reports another address as its own,
// as one bound beyond loopback would: tests bind loopback only.
type misreported struct {
	net.Listener
	addr net.Addr
}

func (l misreported) Addr() net.Addr { return l.addr }

// bindsOnLoopback is a Listen that binds 127.0.0.1 whatever it is asked for,
// reports the address asked for as the one bound, and records what it was asked.
func bindsOnLoopback(t *testing.T, asked *[]string, real *[]net.Listener) func(string, string) (net.Listener, error) {
	return func(network, addr string) (net.Listener, error) {
		*asked = append(*asked, addr)
		ln, err := net.Listen(network, "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { ln.Close() })
		*real = append(*real, ln)
		ap := netip.MustParseAddrPort(addr)
		return misreported{Listener: ln, addr: net.TCPAddrFromAddrPort(ap)}, nil
	}
}

// TestBinder_ResolvesThenJudges: a name is resolved before anything is bound,
// the address it resolved to is bound, and both it and the address bound are
// judged: localhost resolving beyond loopback needs the token.
func TestBinder_ResolvesThenJudges(t *testing.T) {
	judge := func(token string) func(net.Addr) error {
		return func(a net.Addr) error { return CheckExposure("localhost:8080", a, token, false) }
	}
	t.Run("resolved beyond loopback", func(t *testing.T) {
		var asked []string
		var real []net.Listener
		b := Binder{Resolve: resolveTo("192.0.2.7"), Listen: bindsOnLoopback(t, &asked, &real)}
		ln, err := b.Bind(t.Context(), "localhost:8080", judge(""))
		if err == nil || !strings.Contains(err.Error(), "serves beyond loopback") || !strings.Contains(err.Error(), "192.0.2.7:8080") {
			t.Fatalf("localhost resolving to 192.0.2.7 without a token: %v, %v; want refused", ln, err)
		}
		if len(asked) != 0 {
			t.Errorf("bound %v before refusing", asked)
		}
		ln, err = b.Bind(t.Context(), "localhost:8080", judge(testToken))
		if err != nil {
			t.Fatalf("with the token: %v", err)
		}
		if len(asked) != 1 || asked[0] != "192.0.2.7:8080" || ln.Addr().String() != "192.0.2.7:8080" {
			t.Errorf("asked to bind %v, bound %v; want the address resolved, 192.0.2.7:8080", asked, ln.Addr())
		}
	})
	t.Run("bound beyond loopback", func(t *testing.T) {
		// The name resolved to loopback, but the address bound is not: the
		// address bound is what is served, and what is judged.
		var asked []string
		var real []net.Listener
		listen := bindsOnLoopback(t, &asked, &real)
		b := Binder{Resolve: resolveTo("127.0.0.1"), Listen: func(network, _ string) (net.Listener, error) {
			return listen(network, "192.0.2.7:8080")
		}}
		if ln, err := b.Bind(t.Context(), "localhost:8080", judge("")); err == nil || !strings.Contains(err.Error(), "192.0.2.7:8080") {
			t.Fatalf("bound to 192.0.2.7 without a token: %v, %v; want refused", ln, err)
		}
		if len(real) != 1 {
			t.Fatalf("%d binds, want 1", len(real))
		}
		if c, err := net.Dial("tcp", real[0].Addr().String()); err == nil {
			c.Close()
			t.Error("the refused listener is still open")
		}
	})
}

// TestBinder_BindsLoopback binds loopback for real: an IP literal, and a name
// resolved, the first IPv4 address first; both the address resolved and the
// one bound are judged.
func TestBinder_BindsLoopback(t *testing.T) {
	for _, tc := range []struct {
		name, addr string
		b          Binder
		want       string // the IP bound
	}{
		{"127.0.0.1", "127.0.0.1:0", Binder{}, "127.0.0.1"},
		{"[::1]", "[::1]:0", Binder{}, "::1"},
		{"localhost", "localhost:0", Binder{}, ""},
		{"a name with both", "both.test:0", Binder{Resolve: resolveTo("::1", "127.0.0.1")}, "127.0.0.1"},
		{"a name with ::1", "six.test:0", Binder{Resolve: resolveTo("::1")}, "::1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var judged []net.Addr
			ln, err := tc.b.Bind(t.Context(), tc.addr, func(a net.Addr) error {
				judged = append(judged, a)
				return CheckExposure(tc.addr, a, "", false)
			})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			bound := ln.Addr().(*net.TCPAddr)
			if !bound.IP.IsLoopback() || tc.want != "" && bound.IP.String() != tc.want || bound.Port == 0 {
				t.Errorf("bound %v, want %s on a port", bound, tc.want)
			}
			if len(judged) != 2 || judged[1] != ln.Addr() {
				t.Errorf("judged %v, want the address resolved and then the one bound (%v)", judged, ln.Addr())
			}
			c, err := net.Dial("tcp", bound.String())
			if err != nil {
				t.Fatalf("dial what was bound: %v", err)
			}
			c.Close()
		})
	}
}

// TestBinder_EveryInterfaceIsRefusedUnbound: ":8080" is every interface, judged
// so before anything is bound.
func TestBinder_EveryInterfaceIsRefusedUnbound(t *testing.T) {
	var asked []string
	var real []net.Listener
	b := Binder{Listen: bindsOnLoopback(t, &asked, &real)}
	for _, addr := range []string{":8080", "0.0.0.0:8080", "[::]:8080"} {
		if _, err := b.Bind(t.Context(), addr, func(a net.Addr) error { return CheckExposure(addr, a, "", false) }); err == nil || !strings.Contains(err.Error(), "serves beyond loopback") {
			t.Errorf("%s without a token: %v, want refused", addr, err)
		}
	}
	if len(asked) != 0 {
		t.Errorf("bound %v before refusing", asked)
	}
	if _, err := b.Bind(t.Context(), "no-port", func(net.Addr) error { return nil }); err == nil || !strings.Contains(err.Error(), "HOST:PORT") {
		t.Errorf("an address without a port: %v", err)
	}
}
