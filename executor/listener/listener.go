package listener

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds of a listener (DESIGN §15): past one the client gets 503 or its
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

// Listen opens addr and serves it until Shutdown.
func (s *Server) Listen(addr string) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", addr, err)
	}
	return s.Serve(ln), nil
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
