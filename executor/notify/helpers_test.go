package notify

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/internal/testwait"
	"github.com/stepseq/stepseq/executor/metrics"
)

// effectWait bounds the tests' waits for an effect. A passing test never waits
// it out, so it is generous: on two cores shared with other builds, under
// -race, what takes a second alone can take a minute.
const effectWait = 5 * time.Minute

// eventually waits for cond, failing the test after a generous deadline. It polls:
// the conditions are effects in files and servers, which send no signal.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, effectWait, what, cond)
}

// quickRetry retries within milliseconds, so that tests of recovery are short.
var quickRetry = Retry{Initial: time.Millisecond, Max: 4 * time.Millisecond, For: time.Hour}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("NOTIFY_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func closeNotifier(t testing.TB, n *Notifier) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// hook is a loopback webhook receiver that answers 503 while down.
type hook struct {
	srv      *httptest.Server
	down     atomic.Bool
	failures atomic.Int64 // answer 503 this many more times, down or not
	requests atomic.Int64

	mu  sync.Mutex
	ids []string // every report received, repeats included
	bad []string // what was wrong with a request, if anything
}

func newHook(t testing.TB) *hook {
	h := &hook{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.requests.Add(1)
		body, _ := io.ReadAll(r.Body)
		if h.down.Load() || h.failures.Add(-1) >= 0 {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		var rep Notice
		h.mu.Lock()
		defer h.mu.Unlock()
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			h.bad = append(h.bad, r.Method+" "+r.Header.Get("Content-Type"))
		}
		if err := json.Unmarshal(body, &rep); err != nil || rep.ID == "" || r.Header.Get("Idempotency-Key") != rep.ID {
			h.bad = append(h.bad, string(body))
		}
		h.ids = append(h.ids, rep.ID)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hook) received() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.ids...)
}

// firstSeen drops repeats, as a receiver does, keeping the order of first arrival.
func firstSeen(ids []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// counter reads a counter from reg: name, and the sink kind when it has one.
func counter(t testing.TB, reg *metrics.Registry, name, sink string) float64 {
	t.Helper()
	var labels []string
	if sink != "" {
		labels = []string{sink}
	}
	v, _ := reg.Value(name, labels...)
	return v
}

func emitN(t testing.TB, n *Notifier, count int, step string) []string {
	t.Helper()
	var ids []string
	for i := range count {
		r, err := n.Emit(Notice{Plan: "p", Step: step, Try: i + 1, Who: "agent", Status: "milestone", Output: "did a thing", Next: "the next thing"})
		if err != nil {
			t.Fatalf("emit: %v", err)
		}
		ids = append(ids, r.ID)
	}
	return ids
}
