package mcp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// gateClock is the session gate's clock, moved by the test: which session is
// idle, and which least recently used, is then decided, not raced.
type gateClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *gateClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *gateClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// gated serves Handler(opt) on a loopback port, its gate on a clock the test
// moves; it returns the server's URL, the gate and the clock.
func gated(t *testing.T, opt Options) (string, *sessionGate, *gateClock) {
	t.Helper()
	w := newWorkspace(t)
	opt.Runtime, opt.Engine = w.rt, SidecarEngine(w.sc)
	gate := Handler(opt).(*sessionGate)
	clock := &gateClock{now: time.Date(2026, 2, 10, 21, 30, 0, 0, time.UTC)}
	gate.now = clock.Now
	srv := httptest.NewServer(gate)
	t.Cleanup(srv.Close)
	return srv.URL, gate, clock
}

// peer is an MCP client over HTTP from one loopback address: every address of
// 127.0.0.0/8 is the machine's own on Linux, so one test can be many clients,
// as a flood from 127.0.0.2 to 127.0.0.9 is.
type peer struct {
	url    string
	ip     string
	bearer string // the token it presents; "": none
	c      *http.Client
}

func newPeer(t *testing.T, url, ip, bearer string) *peer {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4}
	t.Cleanup(tr.CloseIdleConnections)
	return &peer{url: url, ip: ip, bearer: bearer, c: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// post sends one JSON-RPC message, in session id ("" for none), and returns
// the status and the session id of the answer.
func (p *peer) post(t *testing.T, id, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if id != "" {
		req.Header.Set("Mcp-Session-Id", id)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	if p.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+p.bearer)
	}
	resp, err := p.c.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", p.ip, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
}

// open sends initialize, as a client that never closes its session would.
func (p *peer) open(t *testing.T) (int, string) {
	t.Helper()
	return p.post(t, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"`+p.ip+`","version":"1"}}}`)
}

// ping is a request in session id; 404 once the session is gone.
func (p *peer) ping(t *testing.T, id string) int {
	t.Helper()
	code, _ := p.post(t, id, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	return code
}

// openN opens n sessions, the clock moving a millisecond after each, so that
// the first opened is the least recently used.
func (p *peer) openN(t *testing.T, clock *gateClock, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		code, id := p.open(t)
		if code != http.StatusOK || id == "" {
			t.Fatalf("%s: session %d: %d %q", p.ip, i, code, id)
		}
		ids[i] = id
		clock.Add(time.Millisecond)
	}
	return ids
}

// waitGone waits until session id is answered 404.
func (p *peer) waitGone(t *testing.T, id string) {
	t.Helper()
	deadline := time.Now().Add(effectWait)
	for p.ping(t, id) != http.StatusNotFound {
		if time.Now().After(deadline) {
			t.Fatalf("session %s still answers after %s", id, effectWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stream holds an event stream of session id open until the test ends, and
// waits until the gate counts it as a request under way.
func (p *peer) stream(t *testing.T, gate *sessionGate, id string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := p.c.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(effectWait)
	for !gate.underWay(id) {
		if time.Now().After(deadline) {
			t.Fatalf("the event stream of %s is not under way after %s", id, effectWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// underWay says whether session id has a request under way.
func (g *sessionGate) underWay(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.held[id]
	return s != nil && s.inFlight > 0
}

// TestHandler_IdleSessionsGiveWay replays the two floods, at the default
// bounds: 64 sessions opened from one address and left, then 64 from each of
// 127.0.0.2 to 127.0.0.9. While they are fresh, the next client is refused
// (429, 503); once they have been idle for SessionYield, the least recently
// used one gives way and the next client is let in. A session with a request
// under way (an open event stream) never gives way, nor one used since.
func TestHandler_IdleSessionsGiveWay(t *testing.T) {
	t.Run("one address", func(t *testing.T) {
		url, gate, clock := gated(t, Options{})
		flood := newPeer(t, url, "127.0.0.1", "")
		ids := flood.openN(t, clock, DefaultMaxSessionsPerClient)
		next := newPeer(t, url, "127.0.0.1", "")
		if code, _ := next.open(t); code != http.StatusTooManyRequests {
			t.Fatalf("a client beside %d fresh sessions of its address: %d, want 429", len(ids), code)
		}
		flood.stream(t, gate, ids[0])
		clock.Add(DefaultSessionYield)
		if code := flood.ping(t, ids[1]); code != http.StatusOK {
			t.Fatalf("ping: %d", code)
		}
		for i, want := range []string{ids[2], ids[3]} {
			if code, id := next.open(t); code != http.StatusOK || id == "" {
				t.Fatalf("new session %d once the flood was idle for %s: %d, want 200", i, DefaultSessionYield, code)
			}
			flood.waitGone(t, want)
		}
		if code := flood.ping(t, ids[1]); code != http.StatusOK {
			t.Errorf("the session used since gave way: %d", code)
		}
		if !gate.underWay(ids[0]) {
			t.Error("the session with an event stream open gave way")
		}
		if code := flood.ping(t, ids[4]); code != http.StatusOK {
			t.Errorf("more sessions gave way than new ones came: %d", code)
		}
	})
	t.Run("eight addresses", func(t *testing.T) {
		url, _, clock := gated(t, Options{})
		var floods []*peer
		var ids [][]string
		for i := 2; i <= 9; i++ {
			p := newPeer(t, url, fmt.Sprintf("127.0.0.%d", i), "")
			floods = append(floods, p)
			ids = append(ids, p.openN(t, clock, DefaultMaxSessionsPerClient))
		}
		next := newPeer(t, url, "127.0.0.10", "")
		if code, _ := next.open(t); code != http.StatusServiceUnavailable {
			t.Fatalf("a new client beside %d fresh sessions: %d, want 503", DefaultMaxSessions, code)
		}
		clock.Add(DefaultSessionYield - time.Second)
		if code, _ := next.open(t); code != http.StatusServiceUnavailable {
			t.Fatalf("a new client before the flood was idle for %s: %d, want 503", DefaultSessionYield, code)
		}
		clock.Add(time.Second)
		if code := floods[0].ping(t, ids[0][0]); code != http.StatusOK {
			t.Fatalf("ping: %d", code)
		}
		if code, id := next.open(t); code != http.StatusOK || id == "" {
			t.Fatalf("a new client once the flood was idle for %s: %d, want 200", DefaultSessionYield, code)
		}
		floods[0].waitGone(t, ids[0][1])
		if code := floods[0].ping(t, ids[0][0]); code != http.StatusOK {
			t.Errorf("the session used since gave way: %d", code)
		}
	})
}

// TestHandler_TokenSessionsApart: a client with the token gets a session
// however many the clients without it hold, from its own address or any; and
// no session with the token gives way to one without, though it be idle and
// the least recently used.
func TestHandler_TokenSessionsApart(t *testing.T) {
	const token = "the-listener-token-0123456789"
	url, _, clock := gated(t, Options{MaxSessions: 4, MaxSessionsPerClient: 2,
		Authenticated: func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer "+token }})
	stranger, other := newPeer(t, url, "127.0.0.1", ""), newPeer(t, url, "127.0.0.2", "")
	strangerIDs := append(stranger.openN(t, clock, 2), other.openN(t, clock, 2)...)
	late := newPeer(t, url, "127.0.0.4", "")
	if code, _ := late.open(t); code != http.StatusServiceUnavailable {
		t.Fatalf("past the bound, without the token: %d, want 503", code)
	}
	owner, worker := newPeer(t, url, "127.0.0.1", token), newPeer(t, url, "127.0.0.3", token)
	tokenIDs := append(owner.openN(t, clock, 2), worker.openN(t, clock, 2)...)
	if code, _ := owner.open(t); code != http.StatusTooManyRequests {
		t.Fatalf("past its own bound, with the token: %d, want 429", code)
	}

	// The sessions with the token idle and the least recently used, those
	// without it busy: a newcomer without the token waits.
	clock.Add(DefaultSessionYield)
	for _, id := range strangerIDs {
		if code := other.ping(t, id); code != http.StatusOK {
			t.Fatalf("ping: %d", code)
		}
	}
	if code, _ := late.open(t); code != http.StatusServiceUnavailable {
		t.Fatalf("without the token, beside idle sessions with it only: %d, want 503", code)
	}
	clock.Add(DefaultSessionYield)
	for i, p := range []*peer{late, late, newPeer(t, url, "127.0.0.5", ""), newPeer(t, url, "127.0.0.5", "")} {
		if code, _ := p.open(t); code != http.StatusOK {
			t.Fatalf("without the token, once all were idle, session %d: %d, want 200", i, code)
		}
	}
	for _, id := range strangerIDs {
		other.waitGone(t, id)
	}
	for _, id := range tokenIDs {
		if code := owner.ping(t, id); code != http.StatusOK {
			t.Errorf("a session with the token gave way to one without: %d", code)
		}
	}
}

// A client that opens its event stream as soon as it reads initialize's answer,
// before the server's handler has returned, is still known to have listened:
// when that stream ends and the grace passes, the client has left.
func TestGate_StreamOpenedBeforeInitializeReturns(t *testing.T) {
	release := make(chan struct{})
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Session-Id") != "" {
			return // the event stream, ended at once
		}
		w.Header().Set("Mcp-Session-Id", "s1")
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
		<-release
	})
	clock := &gateClock{now: time.Date(2026, 2, 10, 21, 30, 0, 0, time.UTC)}
	gate := &sessionGate{next: next, max: 4, per: 4, yield: time.Minute, grace: time.Second,
		now: clock.Now, log: slog.New(slog.DiscardHandler), held: map[string]*heldSession{}}
	srv := httptest.NewServer(gate)
	t.Cleanup(srv.Close)

	res, err := http.Post(srv.URL, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Mcp-Session-Id", res.Header.Get("Mcp-Session-Id"))
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = stream.Body.Close()
	close(release)
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()

	clock.Add(2 * time.Second)
	if !gate.gone("s1") {
		t.Fatal("the session's stream ended and its grace passed, yet the gate does not see its client gone")
	}
}
