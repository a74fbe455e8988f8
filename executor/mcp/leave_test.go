package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// cutter drops one session's connections, as a network does when a client
// goes away without DELETE: its open event stream ends and its later
// requests find no server.
type cutter struct {
	next http.Handler

	mu      sync.Mutex
	cut     string
	streams map[string][]context.CancelFunc
}

func (c *cutter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("Mcp-Session-Id")
	c.mu.Lock()
	if id != "" && id == c.cut {
		c.mu.Unlock()
		panic(http.ErrAbortHandler)
	}
	if id != "" && r.Method == http.MethodGet {
		ctx, cancel := context.WithCancel(r.Context())
		r = r.WithContext(ctx)
		c.streams[id] = append(c.streams[id], cancel)
	}
	c.mu.Unlock()
	c.next.ServeHTTP(w, r)
}

func (c *cutter) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = id
	for _, cancel := range c.streams[id] {
		cancel()
	}
}

// An HTTP worker that leaves without DELETE, holding a pulled try, gives it up
// once its stream has been gone for the grace: the next worker's step_current
// gets it, instead of "taken by another worker" for the session's idle life.
func TestHandler_LeftWorkerFreesItsTry(t *testing.T) {
	w := newWorkspace(t)
	c := &cutter{next: Handler(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc), StreamGrace: 300 * time.Millisecond}), streams: map[string][]context.CancelFunc{}}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	dial := func(name string) *sdk.ClientSession {
		cs, err := sdk.NewClient(&sdk.Implementation{Name: name, Version: "1"}, nil).
			Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: 1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	a := dial("worker-a")
	if _, errText := call(t, a, "plan_submit", map[string]any{"name": "pull", "yaml": pullPlan}); errText != "" {
		t.Fatal(errText)
	}
	waitTool(t, a, "step_current", map[string]any{}, func(o map[string]any) bool { return o["step"] != nil })
	// Its stream is open before it leaves: wait for the gate to have seen it.
	deadline := time.Now().Add(effectWait)
	for {
		c.mu.Lock()
		n := len(c.streams[a.ID()])
		c.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("worker-a never opened its event stream")
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.drop(a.ID())
	b := dial("worker-b")
	t.Cleanup(func() { _ = b.Close() })
	out := waitTool(t, b, "step_current", map[string]any{}, func(o map[string]any) bool { return o["step"] != nil })
	if s := out["step"].(map[string]any); s["id"] != "fetch" {
		t.Errorf("worker-b got %v, want fetch", s)
	}
}
