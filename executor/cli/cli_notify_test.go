package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/metrics"
	"github.com/stepseq/stepseq/executor/notify"
	"github.com/stepseq/stepseq/executor/store"
)

// twoSteps is a plan of two steps whose agent (`true`) succeeds at once.
const twoSteps = "name: told\nsteps:\n  - id: one\n    title: One\n    instruction: first\n  - id: two\n    title: Two\n    instruction: second\n"

// hook is a loopback webhook that answers 500 to its first fail requests, or
// while down, and keeps the reports it accepted.
type hook struct {
	mu   sync.Mutex
	fail int
	down bool
	got  []notify.Notice
	srv  *httptest.Server
}

func newHook(t *testing.T, fail int) *hook {
	h := &hook{fail: fail}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.down || h.fail > 0 {
			h.fail--
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		var rep notify.Notice
		if err := json.Unmarshal(body, &rep); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.got = append(h.got, rep)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hook) setDown(down bool) {
	h.mu.Lock()
	h.down = down
	h.mu.Unlock()
}

// ids are the reports received, each once, in the order first received.
func (h *hook) ids() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.got {
		if !slices.Contains(out, r.ID) {
			out = append(out, r.ID)
		}
	}
	return out
}

func (h *hook) has(status string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.ContainsFunc(h.got, func(r notify.Notice) bool { return r.Status == status || r.Event == status })
}

// workspaceWith makes a workspace with plan in plans/p.yaml.
func workspaceWith(t *testing.T, plan string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "plans"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plans", "p.yaml"), []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// feedIDs are the IDs of every report in the workspace's feed, in order.
func feedIDs(t *testing.T, dir string) []string {
	t.Helper()
	reps, err := notify.Since(dir, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range reps {
		out = append(out, r.ID)
	}
	return out
}

// TestWatch_WebhookRecovers: a webhook that fails for a while, then recovers,
// receives every transition of a plan the sidecar ran, in order.
func TestWatch_WebhookRecovers(t *testing.T) {
	dir := workspaceWith(t, twoSteps)
	h := newHook(t, 3)
	t.Setenv("STEP_AGENT_CMD", "true")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"watch", "--log-level", "error", "--notify-webhook", h.srv.URL + "/hook", dir}, io.Discard, io.Discard)
	}()
	waitFor(t, "the plan's end at the webhook", func() bool { return h.has("plan_done") })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("watch: %v", err)
	}
	feed := feedIDs(t, dir)
	if got := h.ids(); !slices.Equal(got, feed) {
		t.Fatalf("the webhook received %v\nthe feed holds     %v", got, feed)
	}
	var statuses []string
	for _, r := range h.got {
		statuses = append(statuses, r.Status+"/"+r.Event)
	}
	for _, want := range []string{"dispatching/", "done/", "done/plan_done"} {
		if !slices.Contains(statuses, want) {
			t.Errorf("no %s among %v", want, statuses)
		}
	}
}

// TestWatch_RestartDelivers: reports a sidecar could not deliver are delivered
// by the next one on the workspace, none lost, none out of order.
func TestWatch_RestartDelivers(t *testing.T) {
	dir := workspaceWith(t, twoSteps)
	h := newHook(t, 0)
	h.setDown(true)
	t.Setenv("STEP_AGENT_CMD", "true")
	args := []string{"watch", "--exit-when-done", "--log-level", "error", "--notify-webhook", h.srv.URL, dir}
	if err := run(context.Background(), args, io.Discard, io.Discard); err != nil {
		t.Fatalf("first watch: %v", err)
	}
	feed := feedIDs(t, dir)
	if len(feed) < 5 || len(h.ids()) != 0 {
		t.Fatalf("first run: feed %v, webhook %v", feed, h.ids())
	}
	h.setDown(false)
	if err := run(context.Background(), args, io.Discard, io.Discard); err != nil {
		t.Fatalf("second watch: %v", err)
	}
	if got := h.ids(); !slices.Equal(got, feed) {
		t.Fatalf("after the restart the webhook received %v\nthe feed holds %v", got, feed)
	}
}

// TestWatch_HangingSinkPlanFinishes: a command sink that never returns delays
// neither the plan nor the sidecar's exit.
func TestWatch_HangingSinkPlanFinishes(t *testing.T) {
	dir := workspaceWith(t, "name: hung\nnotify:\n  - command: [sleep, \"600\"]\n"+strings.TrimPrefix(twoSteps, "name: told\n"))
	t.Setenv("STEP_AGENT_CMD", "true")
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), []string{"watch", "--exit-when-done", "--log-level", "error", dir}, io.Discard, io.Discard)
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
	case <-time.After(effectWait):
		t.Fatal("the sidecar did not end with a hanging sink")
	}
	st, err := (&store.StateFile{Path: filepath.Join(dir, "state.json")}).Read()
	if err != nil || st.Status != "DONE" {
		t.Fatalf("state %v, %v; want DONE", st, err)
	}
	if ids := feedIDs(t, dir); len(ids) < 5 {
		t.Errorf("the feed holds %d reports", len(ids))
	}
}

// blockingNotifier holds the loop in Notify until released.
type blockingNotifier struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (b *blockingNotifier) Notify(core.Notification) {
	b.once.Do(func() {
		close(b.entered)
		<-b.release
	})
}

// TestWatch_HealthzStuckLoop: a loop held in one turn (here by a notifier that
// does not return) turns /healthz unhealthy past the bound, and healthy again
// once it turns.
func TestWatch_HealthzStuckLoop(t *testing.T) {
	dir := workspaceWith(t, twoSteps)
	t.Setenv("STEP_AGENT_CMD", "true")
	rt, err := engine.NewRuntime(filepath.Join(dir, "state.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	b := &blockingNotifier{entered: make(chan struct{}), release: make(chan struct{})}
	sc, err := engine.NewSidecar(rt, engine.SidecarOptions{Notifier: b, ExitWhenDone: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	stop := serveHealth(context.Background(), healthServer{Listener: ln, Sidecar: sc, Registry: metrics.NewRegistry(), Bound: 50 * time.Millisecond, LogErr: t.Logf})
	defer stop()
	done := make(chan error, 1)
	go func() { done <- sc.Run(context.Background()) }()
	<-b.entered
	healthz := func() int {
		code, _, err := get("http://" + addr + "/healthz")
		if err != nil {
			return 0
		}
		return code
	}
	waitFor(t, "/healthz 503 while the loop is stuck", func() bool { return healthz() == http.StatusServiceUnavailable })
	close(b.release)
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if code := healthz(); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz after the loop ended = %d, want 503", code)
	}
}

// TestStatusView_FollowNotes: status --follow on a pipe prints each new
// notification once, as it is written to the feed, between reports.
func TestStatusView_FollowNotes(t *testing.T) {
	dir := t.TempDir()
	replaceFile(t, filepath.Join(dir, "state.json"), runningState)
	n, err := notify.New(notify.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	var out, logs syncBuffer
	v := followView(t, dir, &out, &logs, false, func() time.Time { return time.Date(2026, 2, 10, 21, 31, 0, 0, time.UTC) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- v.followChanges(ctx, time.Second) }()
	waitFor(t, "the first report", func() bool { return strings.Contains(out.String(), "running 1m0s") })
	for _, s := range []string{"accepted", "milestone"} {
		n.Notify(core.Notification{Time: time.Now(), Plan: "p", Step: "build", Try: 1, Who: "worker", Status: s, Output: "said " + s, Next: "more"})
	}
	waitFor(t, "both notifications", func() bool {
		return strings.Contains(out.String(), "build try 1  milestone: said milestone — next: more")
	})
	replaceFile(t, filepath.Join(dir, "state.json"), doneState)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	text := out.String()
	// Once as it came, once in the last report's list.
	for _, s := range []string{"accepted: said accepted", "milestone: said milestone"} {
		if c := strings.Count(text, s); c != 2 {
			t.Errorf("%q printed %d times, want 2: %q", s, c, text)
		}
	}
	if i, j := strings.Index(text, "said accepted"), strings.Index(text, "said milestone"); i < 0 || j < i {
		t.Errorf("the notifications are not in order: %q", text)
	}
}

// TestWatch_ReportComesAfterTheStateItTells: each report reaches a sink only
// once state.json holds what it says, so that whoever acts on it finds the
// state agreeing: a step said dispatched is in progress, and one said out of
// tries is blocked, so that the stepseq retry the report names is taken.
func TestWatch_ReportComesAfterTheStateItTells(t *testing.T) {
	dir := workspaceWith(t, "name: told\nsteps:\n  - id: one\n    title: One\n    instruction: first\n")
	var mu sync.Mutex
	var seen []string // status/event#try of each report: what state.json said as it came
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var rep notify.Notice
		if err := json.Unmarshal(body, &rep); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		st, err := (&store.StateFile{Path: filepath.Join(dir, "state.json")}).Read()
		said := "no state"
		if err == nil {
			run := st.Run("one")
			said = fmt.Sprintf("%s %s tries=%d blockers=%d", run.Status, run.Phase, run.Tries, len(st.Blockers))
		}
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s/%s#%d: %s", rep.Status, rep.Event, rep.Try, said))
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	t.Setenv("STEP_AGENT_CMD", "false")
	t.Setenv("STEP_MAX_RETRIES", "1")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"watch", "--log-level", "error", "--notify-webhook", srv.URL, dir}, io.Discard, io.Discard)
	}()
	waitFor(t, "the plan blocked at the webhook", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(seen, func(s string) bool { return strings.Contains(s, "/plan_blocked#") })
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("watch: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range seen {
		event, said, _ := strings.Cut(s, ": ")
		// The state may be further on than a report by the time it is read
		// (the agent fails at once), never behind it.
		switch {
		case strings.HasPrefix(event, "dispatching/") && !strings.Contains(said, "tries=1"):
			t.Errorf("%s came while state.json said %s: want its try recorded", event, said)
		case strings.Contains(event, "retries_exhausted") || strings.Contains(event, "plan_blocked"):
			if !strings.HasPrefix(said, "FAILED blocked") || strings.HasSuffix(said, "blockers=0") {
				t.Errorf("%s came while state.json said %s: want the step blocked, so that stepseq retry takes it", event, said)
			}
		}
	}
	t.Logf("reports as they came: %q", seen)
}
