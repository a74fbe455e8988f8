package notify

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/metrics"
)

func TestNotifier_WebhookFailsThenRecovers(t *testing.T) {
	h := newHook(t)
	h.failures.Store(3)
	reg := metrics.NewRegistry()
	n, err := New(Config{Dir: t.TempDir(), Sinks: []SinkConfig{{Webhook: h.srv.URL + "/hook?token=secret"}},
		Retry: quickRetry, Logger: testLogger(t), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer closeNotifier(t, n)
	ids := emitN(t, n, 5, "build")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := firstSeen(h.received()); !slices.Equal(got, ids) {
		t.Errorf("received %v, want %v in order", got, ids)
	}
	if len(h.bad) > 0 {
		t.Errorf("malformed requests: %q", h.bad)
	}
	if got := counter(t, reg, "stepseq_notify_failed_total", KindWebhook); got != 3 {
		t.Errorf("failed attempts = %v, want 3", got)
	}
	if got := counter(t, reg, "stepseq_notify_delivered_total", KindWebhook); got != 5 {
		t.Errorf("delivered = %v, want 5", got)
	}
	if got := counter(t, reg, "stepseq_notify_reports_total", ""); got != 5 {
		t.Errorf("emitted = %v, want 5", got)
	}
}

// A report still failing once it is older than Retry.For is given up, through
// OnGiveUp, and the sink goes on with the next one.
func TestNotifier_WebhookGivesUp(t *testing.T) {
	h := newHook(t)
	h.down.Store(true)
	var clock struct {
		sync.Mutex
		now time.Time
	}
	clock.now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := func() time.Time { clock.Lock(); defer clock.Unlock(); return clock.now }
	type giveUp struct {
		sink string
		r    Notice
		err  error
	}
	gaveUp := make(chan giveUp, 10)
	reg := metrics.NewRegistry()
	n, err := New(Config{Dir: t.TempDir(), Sinks: []SinkConfig{{Webhook: h.srv.URL + "/T000/B000/secret"}},
		Retry: quickRetry, Logger: testLogger(t), Now: now, Registerer: reg,
		OnGiveUp: func(sink string, r Notice, err error) { gaveUp <- giveUp{sink, r, err} }})
	if err != nil {
		t.Fatal(err)
	}
	defer closeNotifier(t, n)
	first, err := n.Emit(Notice{Plan: "p", Step: "a", Status: "blocked"})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "a few failed attempts", func() bool { return h.requests.Load() >= 3 })
	clock.Lock()
	clock.now = clock.now.Add(time.Hour)
	clock.Unlock()
	select {
	case g := <-gaveUp:
		if g.r.ID != first.ID || g.err == nil {
			t.Errorf("gave up %+v (%v), want report %s with its error", g.r, g.err, first.ID)
		}
		if g.sink != "webhook "+h.srv.URL {
			t.Errorf("sink named %q, want the URL without its path", g.sink)
		}
	case <-time.After(effectWait):
		t.Fatal("no give-up")
	}
	h.down.Store(false)
	second, err := n.Emit(Notice{Plan: "p", Step: "a", Status: "accepted"})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the next report delivered", func() bool { return slices.Contains(h.received(), second.ID) })
	if slices.Contains(h.received(), first.ID) {
		t.Error("the given-up report was delivered after all")
	}
	if got := counter(t, reg, "stepseq_notify_given_up_total", KindWebhook); got != 1 {
		t.Errorf("given up = %v, want 1", got)
	}
}

func TestNew_RejectsBadSinks(t *testing.T) {
	for name, sc := range map[string]SinkConfig{
		"neither":  {},
		"both":     {Command: []string{"true"}, Webhook: "http://localhost/"},
		"scheme":   {Webhook: "ftp://example.com/x"},
		"relative": {Webhook: "/just/a/path"},
	} {
		t.Run(name, func(t *testing.T) {
			n, err := New(Config{Dir: t.TempDir(), Sinks: []SinkConfig{sc}})
			if err == nil {
				closeNotifier(t, n)
				t.Fatal("accepted")
			}
		})
	}
}

func TestNotifier_EmitAfterClose(t *testing.T) {
	n, err := New(Config{Dir: t.TempDir(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	closeNotifier(t, n)
	if _, err := n.Emit(Notice{Status: "done"}); !errors.Is(err, ErrClosed) {
		t.Errorf("emit after close: %v, want ErrClosed", err)
	}
}

// Flush returns once every sink has every report: a short-lived driver's reports
// go out before it exits.
func TestNotifier_Flush(t *testing.T) {
	h := newHook(t)
	h.failures.Store(2)
	n, err := New(Config{Dir: t.TempDir(), Sinks: []SinkConfig{{Webhook: h.srv.URL}}, Retry: quickRetry, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer closeNotifier(t, n)
	ids := emitN(t, n, 3, "s")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := h.received(); !slices.Equal(got, ids) {
		t.Errorf("after Flush the webhook has %v, want %v", got, ids)
	}
}

// TestNewWebhook_Refuses: a URL no report can be posted to is refused as the
// plan's notify list refuses it, the URL's path and query (a token) left out.
func TestNewWebhook_Refuses(t *testing.T) {
	_, err := newWebhook("ftp://example.com/hook?token=secret")
	if want := `notify: webhook "ftp://example.com": want an http or https URL, like https://ntfy.sh/my-topic`; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
}
