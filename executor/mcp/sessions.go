package mcp

import (
	"net"
	"net/http"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bounds of the MCP sessions over HTTP (DESIGN §15): a session idle this long
// is closed, and a client may hold so many at once; past a bound a new one is
// refused (429 for one client, 503 for all), never the process's memory.
const (
	DefaultSessionIdle          = 10 * time.Minute
	DefaultMaxSessions          = 512
	DefaultMaxSessionsPerClient = 64
)

// sessionGate bounds the sessions a handler opens. It knows a session by the
// Mcp-Session-Id its initialize answer carries, and forgets the ones the
// server no longer holds (closed, expired) when it next counts.
type sessionGate struct {
	srv      *sdk.Server
	next     http.Handler
	max, per int

	mu       sync.Mutex
	clientOf map[string]string // session id → client address
}

func (g *sessionGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
		g.next.ServeHTTP(w, r)
		return
	}
	client := clientAddr(r)
	g.mu.Lock()
	if len(g.clientOf) >= min(g.per, g.max) {
		g.prune() // only near a bound: it walks every session
	}
	total, mine := len(g.clientOf), 0
	for _, c := range g.clientOf {
		if c == client {
			mine++
		}
	}
	g.mu.Unlock()
	switch {
	case total >= g.max:
		w.Header().Set("Retry-After", "60")
		http.Error(w, "too many MCP sessions open: close one (DELETE /mcp) or wait until idle ones expire", http.StatusServiceUnavailable)
		return
	case mine >= g.per:
		w.Header().Set("Retry-After", "60")
		http.Error(w, "this client holds too many MCP sessions: close one (DELETE /mcp) or reuse its Mcp-Session-Id", http.StatusTooManyRequests)
		return
	}
	g.next.ServeHTTP(w, r)
	if id := w.Header().Get("Mcp-Session-Id"); id != "" {
		g.mu.Lock()
		g.clientOf[id] = client
		g.mu.Unlock()
	}
}

// prune forgets the sessions the server no longer holds. Under g.mu.
func (g *sessionGate) prune() {
	live := map[string]bool{}
	for s := range g.srv.Sessions() {
		live[s.ID()] = true
	}
	for id := range g.clientOf {
		if !live[id] {
			delete(g.clientOf, id)
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
