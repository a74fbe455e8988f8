package web

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/internal/testwait"
	"go.uber.org/goleak"
)

// deadline bounds every wait in these tests; reaching it is a failure.
const deadline = 10 * time.Second

// stream is a client of /events.
type stream struct {
	t      testing.TB
	resp   *http.Response
	r      *bufio.Reader
	cancel context.CancelFunc
}

func openStream(t testing.TB, url string) (*stream, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		return nil, resp.StatusCode
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("Content-Type %q", ct)
	}
	s := &stream{t: t, resp: resp, r: bufio.NewReader(resp.Body), cancel: cancel}
	t.Cleanup(s.close)
	return s, resp.StatusCode
}

func (s *stream) close() {
	s.cancel()
	s.resp.Body.Close()
}

// event reads the next event or comment: its name and data, or the comment
// with the name ":".
func (s *stream) event() (name, data string, err error) {
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return "", "", err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if name != "" || data != "" {
				return name, data, nil
			}
		case strings.HasPrefix(line, ":"):
			return ":", strings.TrimSpace(line[1:]), nil
		case strings.HasPrefix(line, "event: "):
			name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			data += line[len("data: "):]
		}
	}
}

// view waits for a view event whose HTML holds want.
func (s *stream) view(want string) string {
	s.t.Helper()
	return s.viewWhere(want, func(data string) bool { return true })
}

// viewWhere is view, for events whose raw data passes quick.
func (s *stream) viewWhere(want string, quick func(data string) bool) string {
	s.t.Helper()
	for {
		name, data, err := s.event()
		if err != nil {
			s.t.Fatalf("no view with %q before the stream ended: %v", want, err)
		}
		if name != "view" || !quick(data) {
			continue
		}
		var v struct{ HTML, Title string }
		if err := json.Unmarshal([]byte(data), &v); err != nil {
			s.t.Fatalf("view event %q: %v", data, err)
		}
		if strings.Contains(v.HTML, want) {
			return v.HTML
		}
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, deadline, what, cond)
}

func (h *Handler) open() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.clients
}

func serve(t *testing.T, src Source, opt Options) (*Handler, *httptest.Server) {
	h := New(src, opt)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Close()
		srv.Close()
	})
	return h, srv
}

func TestHandler_EventsFollowTheSource(t *testing.T) {
	src := newFakeSource(sampleView())
	_, srv := serve(t, src, Options{MinInterval: time.Millisecond})
	s, _ := openStream(t, srv.URL)
	s.view(`data-step="paper" data-phase="dispatching"`)

	src.Set(func(v *View) {
		v.Steps[2].Phase = PhaseInProgress
		v.Steps[2].LastReport = &ReportView{Status: "accepted", Summary: "on it", Evidence: "opened paper/draft.md", Risk: "low", Next: "write"}
	})
	s.view(`data-step="paper" data-phase="in progress"`)

	src.Set(func(v *View) {
		v.Steps[2].Phase, v.Steps[2].Status, v.Status = PhaseDone, "DONE", "done"
		v.Notifications = append(v.Notifications, NoteView{Time: at, Step: "paper", Try: 1, Status: "done", Output: "draft written"})
	})
	html := s.view(`data-step="paper" data-phase="done"`)
	if !strings.Contains(html, "draft written") {
		t.Error("the update lacks the new notification")
	}
}

func TestHandler_EventsRefreshWhileRunning(t *testing.T) {
	src := newFakeSource(sampleView()) // step "paper" runs
	_, srv := serve(t, src, Options{Refresh: 5 * time.Millisecond})
	s, _ := openStream(t, srv.URL)
	s.view("research-paper")
	src.SetQuietly(func(v *View) { v.Steps[2].LogTail = "a line no signal announced" })
	s.view("a line no signal announced")
}

func TestHandler_EventsHeartbeat(t *testing.T) {
	_, srv := serve(t, newFakeSource(View{Plan: "p"}), Options{Heartbeat: 5 * time.Millisecond})
	s, _ := openStream(t, srv.URL)
	for {
		name, data, err := s.event()
		if err != nil {
			t.Fatalf("no heartbeat: %v", err)
		}
		if name == ":" && data == "keep-alive" {
			return
		}
	}
}

func TestHandler_EventsBounded(t *testing.T) {
	h, srv := serve(t, newFakeSource(sampleView()), Options{MaxClients: 2})
	a, _ := openStream(t, srv.URL)
	b, _ := openStream(t, srv.URL)
	a.view("research-paper")
	b.view("research-paper")
	if _, code := openStream(t, srv.URL); code != http.StatusServiceUnavailable {
		t.Fatalf("a third stream got %d, want 503", code)
	}
	a.close()
	waitFor(t, "the closed stream to leave", func() bool { return h.open() == 1 })
	c, code := openStream(t, srv.URL)
	if code != http.StatusOK {
		t.Fatalf("a stream after one left got %d", code)
	}
	c.view("research-paper")
}

// TestHandler_EventsRefusedClosed: a stream refused with 503 loses its
// connection too, asked to keep it alive or not: the server holds no
// descriptor for a client it will not serve.
func TestHandler_EventsRefusedClosed(t *testing.T) {
	_, srv := serve(t, newFakeSource(sampleView()), Options{MaxClients: 1})
	a, _ := openStream(t, srv.URL)
	a.view("research-paper")
	c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(deadline)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("GET /events HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("second stream got %d, want 503", resp.StatusCode)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	if n, err := r.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the 503 the connection is open (read %q, %v); want it closed", n, err)
	}
}

func TestHandler_EventsDisconnectLeaksNothing(t *testing.T) {
	before := goleak.IgnoreCurrent()
	h := New(newFakeSource(sampleView()), Options{})
	srv := httptest.NewServer(h)
	var streams []*stream
	for range 3 {
		s, _ := openStream(t, srv.URL)
		s.view("research-paper")
		streams = append(streams, s)
	}
	for _, s := range streams {
		s.close()
	}
	waitFor(t, "every stream to end", func() bool { return h.open() == 0 })
	srv.Close()
	http.DefaultClient.CloseIdleConnections()
	goleak.VerifyNone(t, before)
}

func TestHandler_CloseEndsStreams(t *testing.T) {
	h := New(newFakeSource(sampleView()), Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	s, _ := openStream(t, srv.URL)
	s.view("research-paper")
	h.Close() // returns once the stream's handler has
	for {
		if _, _, err := s.event(); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatal("the stream did not end")
			}
			break
		}
	}
	if _, code := openStream(t, srv.URL); code != http.StatusServiceUnavailable {
		t.Errorf("a stream after Close got %d, want 503", code)
	}
	if rec := get(t, h, http.MethodGet, "/"); rec.Code != http.StatusOK {
		t.Errorf("the page after Close got %d", rec.Code)
	}
}

func TestHandler_ServerShutdownEndsStreams(t *testing.T) {
	h := New(newFakeSource(sampleView()), Options{})
	srv := &http.Server{Handler: h}
	srv.RegisterOnShutdown(h.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	s, _ := openStream(t, "http://"+ln.Addr().String())
	s.view("research-paper")

	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with a page open: %v", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
	if _, _, err := s.event(); err == nil {
		t.Error("the stream goes on after Shutdown")
	}
}
