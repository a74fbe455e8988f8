package mcp

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bounds of the MCP sessions over HTTP: a session idle this long
// is closed, and a client may hold so many at once; past a bound a new one is
// refused (429 for one client, 503 for all), never the process's memory.
const (
	DefaultSessionIdle          = 10 * time.Minute
	DefaultMaxSessions          = 512
	DefaultMaxSessionsPerClient = 64
	// DefaultSessionYield is how long a session must have gone without a
	// request before it gives way to a new one a bound would refuse. A working
	// client's exchange (initialize, its notification, the calls) leaves gaps
	// of seconds, so no flood displaces a client that is talking; and sessions
	// opened and left are displaced in half a minute, not in SessionIdle. A
	// client whose session gave way is answered 404 and starts another, as the
	// MCP specification has it.
	DefaultSessionYield = 30 * time.Second
	// DefaultStreamGrace is how long a session whose event stream ended may
	// stay away before the tries it holds are offered to the next worker: a
	// client that disconnects without DELETE leaves its session for
	// SessionIdle, and a reconnecting one would be told its step is taken.
	DefaultStreamGrace = 15 * time.Second
)

// sessionGate bounds the sessions a handler opens. It knows a session by the
// Mcp-Session-Id its initialize answer carries, sees every request that names
// one, and forgets the ones the server no longer holds (closed, expired) when
// it next counts. Sessions opened with the listener's token and those opened
// without it are bounded apart, each kind to max and per client: one kind
// never refuses, nor displaces, the other.
type sessionGate struct {
	srv      *sdk.Server
	next     http.Handler
	max, per int
	yield    time.Duration            // idle this long, a session gives way (DefaultSessionYield)
	grace    time.Duration            // its stream gone this long, a session's client has left (DefaultStreamGrace)
	token    func(*http.Request) bool // whether a request presented the token; nil: none does
	now      func() time.Time
	log      *slog.Logger

	mu   sync.Mutex
	held map[string]*heldSession // session id (or pendingKey for an initialize under way) → what the gate knows
	seq  uint64
}

// heldSession is what the gate knows of a session.
type heldSession struct {
	client   string    // the client's address
	token    bool      // opened with the token
	last     time.Time // when its last request ended, or its latest began
	inFlight int       // requests under way: a session with one (an open event stream too) is not idle
	streams  int       // event streams (GET) open now
	streamed bool      // it opened one: a client that listens, whose stream's end means it left
}

// pendingKey keys an initialize under way: it holds its place in the counts
// until the answer names the session.
func pendingKey(seq uint64) string { return "\x00pending " + strconv.FormatUint(seq, 10) }

func (g *sessionGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if id := r.Header.Get("Mcp-Session-Id"); id != "" {
		done := g.begin(id, r.Method == http.MethodGet)
		defer done()
		g.next.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodPost {
		g.next.ServeHTTP(w, r)
		return
	}
	key, code := g.admit(clientAddr(r), g.token != nil && g.token(r))
	switch code {
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", strconv.Itoa(int(g.yield.Seconds())))
		http.Error(w, fmt.Sprintf("too many MCP sessions open, none idle for %s: close one (DELETE /mcp) or try again later", g.yield), code)
		return
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", strconv.Itoa(int(g.yield.Seconds())))
		http.Error(w, fmt.Sprintf("this client holds too many MCP sessions, none idle for %s: close one (DELETE /mcp) or reuse its Mcp-Session-Id", g.yield), code)
		return
	}
	nw := &namingWriter{ResponseWriter: w, opened: func(id string) { g.opened(key, id) }}
	g.next.ServeHTTP(nw, r)
	nw.name()
}

// namingWriter tells the gate which session an initialize opened as its answer's
// header goes out: a client may open its event stream as soon as it reads the
// header, before the handler returns, and that stream must find its session
// held, or its end would never count as the client leaving.
type namingWriter struct {
	http.ResponseWriter
	opened func(id string)
	named  bool
}

func (w *namingWriter) name() {
	if !w.named {
		w.named = true
		w.opened(w.Header().Get("Mcp-Session-Id"))
	}
}

func (w *namingWriter) WriteHeader(code int) {
	w.name()
	w.ResponseWriter.WriteHeader(code)
}

func (w *namingWriter) Write(b []byte) (int, error) {
	w.name()
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's Flush.
func (w *namingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// begin marks a request of session id under way; the func it returns marks
// its end. A session the gate does not hold (unknown, or gone) is left to the
// server to answer.
func (g *sessionGate) begin(id string, stream bool) func() {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.held[id]
	if s == nil {
		return func() {}
	}
	s.inFlight++
	if stream {
		s.streams++
		s.streamed = true
	}
	s.last = g.now()
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		s.inFlight--
		if stream {
			s.streams--
		}
		s.last = g.now()
	}
}

// gone says whether session id's client left: it listened on an event
// stream, has none open now, and has made no request for g.grace.
func (g *sessionGate) gone(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.held[id]
	return s != nil && s.streamed && s.streams == 0 && s.inFlight == 0 && g.now().Sub(s.last) >= g.grace
}

// admit takes a place for a new session of client (of the token's kind or
// not) and returns its pending key, or the status of a refusal: 429 past the
// client's bound, 503 past everyone's. At a bound, the least recently used
// session of the same kind (and, for 429, of the same client) that has been
// idle for g.yield gives way; only with none is the new one refused.
func (g *sessionGate) admit(client string, token bool) (key string, refused int) {
	g.mu.Lock()
	mine, all := g.count(client, token)
	if mine >= g.per || all >= g.max {
		g.prune() // only at a bound: it walks every session
		mine, all = g.count(client, token)
	}
	now := g.now()
	victim := ""
	switch {
	case mine >= g.per:
		if victim = g.leastRecent(now, token, client); victim == "" {
			g.mu.Unlock()
			return "", http.StatusTooManyRequests
		}
	case all >= g.max:
		if victim = g.leastRecent(now, token, ""); victim == "" {
			g.mu.Unlock()
			return "", http.StatusServiceUnavailable
		}
	}
	var idle time.Duration
	if victim != "" {
		idle = now.Sub(g.held[victim].last)
		delete(g.held, victim)
	}
	g.seq++
	key = pendingKey(g.seq)
	g.held[key] = &heldSession{client: client, token: token, last: now, inFlight: 1}
	g.mu.Unlock()
	if victim != "" {
		g.close(victim)
		g.log.Debug("an idle MCP session gave way to a new one", "client", client, "idle", idle.Round(time.Second), "with_token", token)
	}
	return key, 0
}

// opened ends the initialize of key: id is the session it opened ("" when it
// opened none).
func (g *sessionGate) opened(key, id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.held[key]
	delete(g.held, key)
	if s != nil && id != "" {
		s.inFlight, s.last = 0, g.now()
		g.held[id] = s
	}
}

// count is how many sessions of the token's kind client holds, and how many
// all clients do. Under g.mu.
func (g *sessionGate) count(client string, token bool) (mine, all int) {
	for _, s := range g.held {
		if s.token != token {
			continue
		}
		all++
		if s.client == client {
			mine++
		}
	}
	return mine, all
}

// leastRecent is the session of the token's kind (and of client, unless "")
// idle longest, if it has been idle for g.yield at least; "" when there is none.
// Under g.mu.
func (g *sessionGate) leastRecent(now time.Time, token bool, client string) string {
	victim, oldest := "", time.Time{}
	for id, s := range g.held {
		if s.token != token || client != "" && s.client != client || s.inFlight > 0 || now.Sub(s.last) < g.yield {
			continue
		}
		if victim == "" || s.last.Before(oldest) || s.last.Equal(oldest) && id < victim {
			victim, oldest = id, s.last
		}
	}
	return victim
}

// close ends the server's session id: its next request is answered 404.
func (g *sessionGate) close(id string) {
	for ss := range g.srv.Sessions() {
		if ss.ID() == id {
			_ = ss.Close()
			return
		}
	}
}

// prune forgets the sessions the server no longer holds. Under g.mu.
func (g *sessionGate) prune() {
	live := map[string]bool{}
	for s := range g.srv.Sessions() {
		live[s.ID()] = true
	}
	for id, s := range g.held {
		if !live[id] && s.inFlight == 0 {
			delete(g.held, id)
		}
	}
}

// clientAddr is the client's IP address, without its port.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
