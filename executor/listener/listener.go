package listener

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds of a listener: past one the client gets 503 or its
// connection is cut, never the process's memory.
const (
	DefaultMaxConns      = 256
	DefaultHeaderTimeout = 5 * time.Second
	DefaultBodyTimeout   = 10 * time.Second
	DefaultIdleTimeout   = 2 * time.Minute
)

// Server is an HTTP server with stepseq's bounds: at most MaxConns connections
// at once (one more is answered 503 and closed), headers read within
// HeaderTimeout, a request body read within BodyTimeout, an idle keep-alive
// connection closed after IdleTimeout. Zero fields take the defaults.
type Server struct {
	Handler       http.Handler
	MaxConns      int
	HeaderTimeout time.Duration
	BodyTimeout   time.Duration
	IdleTimeout   time.Duration
	// OnShutdown runs when Shutdown starts: event streams end there.
	OnShutdown func()
	// ErrorLog receives the server's own errors (accept failures).
	ErrorLog func(msg string, args ...any)

	srv *http.Server
	ln  *limitListener
}

// Binder opens --listen's address: it resolves the host first and binds the
// address the name resolved to, so that what is judged is what is served.
// Zero fields take the system's resolver and net.Listen; tests give their own.
type Binder struct {
	// Resolve looks a host name up.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Listen binds an IP literal and port (or ":port", every interface).
	Listen func(network, addr string) (net.Listener, error)
}

// Bind binds addr once check allows it: check judges the address resolved,
// before anything is bound, and then the address the listener was actually
// bound to (its Addr); a refusal by either closes what was bound and is the
// error. A name resolving to several addresses binds one, as net.Listen does:
// the first IPv4 one, else the first.
func (b Binder) Bind(ctx context.Context, addr string, check func(net.Addr) error) (net.Listener, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w; want HOST:PORT, like 127.0.0.1:8080", addr, err)
	}
	port, err := net.LookupPort("tcp", portText)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", addr, err)
	}
	ip, err := b.resolve(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", addr, err)
	}
	target := &net.TCPAddr{IP: ip.AsSlice(), Port: port}
	if !ip.IsValid() {
		target.IP = nil // every interface
	}
	if err := check(target); err != nil {
		return nil, err
	}
	listen := b.Listen
	if listen == nil {
		listen = net.Listen
	}
	bindAddr := ":" + strconv.Itoa(port)
	if target.IP != nil {
		bindAddr = netip.AddrPortFrom(ip, uint16(port)).String()
	}
	ln, err := listen("tcp", bindAddr)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", addr, err)
	}
	if err := check(ln.Addr()); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return ln, nil
}

// resolve is the address host names: none (the zero Addr) for every interface,
// the literal itself, or the one a name resolves to.
func (b Binder) resolve(ctx context.Context, host string) (netip.Addr, error) {
	if host == "" {
		return netip.Addr{}, nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Unmap(), nil
	}
	resolve := b.Resolve
	if resolve == nil {
		resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	ips, err := resolve(ctx, host)
	if err != nil {
		return netip.Addr{}, err
	}
	if len(ips) == 0 {
		return netip.Addr{}, fmt.Errorf("%s resolves to no address", host)
	}
	for _, ip := range ips {
		if ip.Unmap().Is4() {
			return ip.Unmap(), nil
		}
	}
	return ips[0], nil
}

// Serve serves ln until Shutdown, and returns its address.
func (s *Server) Serve(ln net.Listener) net.Addr {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&s.HeaderTimeout, DefaultHeaderTimeout)
	def(&s.BodyTimeout, DefaultBodyTimeout)
	def(&s.IdleTimeout, DefaultIdleTimeout)
	if s.MaxConns <= 0 {
		s.MaxConns = DefaultMaxConns
	}
	s.ln = &limitListener{Listener: ln, max: int64(s.MaxConns)}
	s.srv = &http.Server{
		Handler:           BodyDeadline(s.Handler, s.BodyTimeout),
		ReadHeaderTimeout: s.HeaderTimeout,
		IdleTimeout:       s.IdleTimeout,
	}
	if s.OnShutdown != nil {
		s.srv.RegisterOnShutdown(s.OnShutdown)
	}
	go func() {
		if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) && s.ErrorLog != nil {
			s.ErrorLog("http listener", "err", err)
		}
	}()
	return ln.Addr()
}

// Open is the number of connections open now.
func (s *Server) Open() int { return int(s.ln.open.Load()) }

// Shutdown stops accepting, ends the event streams and waits for requests in
// flight, at most until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.srv.Shutdown(ctx)
}

// BodyDeadline cuts the connection of a request whose body is not read within
// d: a client that sends its body a byte at a time holds no connection for
// long. The deadline is lifted once the body has been read, so a long answer
// (an event stream, a tool that waits) is not cut.
func BodyDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
			h.ServeHTTP(w, r)
			return
		}
		r.Body = &deadlineBody{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the read deadline once the body has been read whole. A
// body that failed (the deadline passed) keeps it: the server then discards
// what is left of the body, and that read must fail too, not wait.
type deadlineBody struct {
	io.ReadCloser
	once sync.Once
	lift func()
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.once.Do(b.lift)
	}
	return n, err
}

// limitListener answers a connection past max with 503 and closes it at once,
// so that a flood of connections costs a descriptor for a moment only, and
// the probes still get through once it ebbs.
type limitListener struct {
	net.Listener
	max  int64
	open atomic.Int64
}

// overloaded is what a connection past the bound reads.
const overloaded = "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\n" +
	"Retry-After: 5\r\nContent-Length: 42\r\n\r\ntoo many connections open; try again soon\n"

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = io.WriteString(c, overloaded)
			_ = c.Close()
			continue
		}
		return &countedConn{Conn: c, l: l}, nil
	}
}

type countedConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
