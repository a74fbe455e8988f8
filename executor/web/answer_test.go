package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stepseq/stepseq/executor/engine"
)

// fakeGates records the answers the page hands over, and refuses with err.
type fakeGates struct {
	mu   sync.Mutex
	got  []engine.GateAnswer
	yes  []bool
	err  error
	said string
}

func (f *fakeGates) Answer(a engine.GateAnswer, approve bool) (engine.Answered, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got, f.yes = append(f.got, a), append(f.yes, approve)
	return engine.Answered{Message: f.said}, f.err
}

// TestHandler_Answer: a gate's answer is taken only as a POST from the
// page's own origin with its CSRF token, and only from a page served with
// one (behind the listener's token); the engine's refusals keep their codes.
func TestHandler_Answer(t *testing.T) {
	const csrf = "the-page-csrf"
	gates := &fakeGates{said: "approved step deploy's gate of run main: queued"}
	h := New(newFakeSource(sampleView()), Options{Gates: gates, CSRF: csrf})
	post := func(h http.Handler, method, origin, site, token, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, "http://127.0.0.1:8080/answer", strings.NewReader(body))
		r.RemoteAddr = "127.0.0.1:5555"
		for k, v := range map[string]string{"Origin": origin, "Sec-Fetch-Site": site, CSRFHeader: token} {
			if v != "" {
				r.Header.Set(k, v)
			}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	const self, body = "http://127.0.0.1:8080", `{"step":"deploy","approve":true,"note":"ok"}`
	for _, c := range []struct {
		name                       string
		h                          http.Handler
		method, origin, site, csrf string
		body                       string
		status                     int
		says                       string
	}{
		{"GET", h, http.MethodGet, self, "same-origin", csrf, "", http.StatusMethodNotAllowed, "POST an answer"},
		{"no token behind", New(newFakeSource(sampleView()), Options{}), http.MethodPost, self, "same-origin", csrf, body, http.StatusForbidden, "served without the listener's token"},
		{"no origin", h, http.MethodPost, "", "", csrf, body, http.StatusForbidden, `Origin \"\" is not this page's own`},
		{"other origin", h, http.MethodPost, "http://evil.example", "", csrf, body, http.StatusForbidden, "is not this page's own"},
		{"cross-site", h, http.MethodPost, self, "cross-site", csrf, body, http.StatusForbidden, "a cross-site request"},
		{"no csrf", h, http.MethodPost, self, "same-origin", "", body, http.StatusForbidden, "no CSRF token, or a wrong one"},
		{"wrong csrf", h, http.MethodPost, self, "same-origin", "guess", body, http.StatusForbidden, "no CSRF token, or a wrong one"},
		{"bad body", h, http.MethodPost, self, "same-origin", csrf, `{"step":1}`, http.StatusBadRequest, "want {step, approve, note}"},
		{"taken", h, http.MethodPost, self, "same-origin", csrf, body, http.StatusOK, "queued"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := post(c.h, c.method, c.origin, c.site, c.csrf, c.body)
			if rec.Code != c.status || !strings.Contains(rec.Body.String(), c.says) {
				t.Errorf("%d %s, want %d saying %q", rec.Code, rec.Body, c.status, c.says)
			}
		})
	}
	if len(gates.got) != 1 || !gates.yes[0] || fmt.Sprintf("%+v", gates.got[0]) != fmt.Sprintf("%+v", engine.GateAnswer{Step: "deploy", Note: "ok", By: "page at 127.0.0.1", Face: "web"}) {
		t.Errorf("the engine got %+v %v", gates.got, gates.yes)
	}
	for _, c := range []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("run main: %w: step deploy has no gate", engine.ErrNotWaiting), http.StatusConflict, "not_allowed"},
		{fmt.Errorf("%w \"x\"", engine.ErrNoStep), http.StatusNotFound, "not_found"},
		{fmt.Errorf("%w: say why", engine.ErrNoNote), http.StatusBadRequest, "invalid_params"},
		{errors.New("disk full"), http.StatusServiceUnavailable, "busy"},
	} {
		gates.err = c.err
		rec := post(h, http.MethodPost, self, "same-origin", csrf, body)
		if rec.Code != c.status || !strings.Contains(rec.Body.String(), `"code":"`+c.code+`"`) || !strings.Contains(rec.Body.String(), c.err.Error()[:8]) {
			t.Errorf("%v: %d %s, want %d %s", c.err, rec.Code, rec.Body, c.status, c.code)
		}
	}
}

// TestHandler_GateShown: a gate that waits is shown with its question and
// the commands that answer it; the buttons and the CSRF token only on a page
// that answers gates. Another run's gate shows in the runs' table.
func TestHandler_GateShown(t *testing.T) {
	v := sampleView()
	v.Gate = &GateView{Step: "review", Question: "approval asked before step review runs: <b>Review</b>",
		Approve: "stepseq approve review", Reject: "stepseq reject review --note WHY"}
	v.Runs = []RunView{{Name: "prop", Plan: "proposal", Status: "active", Steps: 1, Current: "one", Awaiting: "plan"}}
	with := get(t, New(newFakeSource(v), Options{Gates: &fakeGates{}, CSRF: "c0ffee"}), http.MethodGet, "/").Body.String()
	without := get(t, New(newFakeSource(v), Options{}), http.MethodGet, "/").Body.String()
	for _, body := range []string{with, without} {
		for _, want := range []string{`data-gate="review"`, "approval asked before step review runs: &lt;b&gt;Review&lt;/b&gt;",
			"<code>stepseq approve review</code>", "<code>stepseq reject review --note WHY</code>",
			`one <span class="pill ph-awaiting_approval" data-awaiting>the plan awaits approval</span>`} {
			if !strings.Contains(body, want) {
				t.Errorf("the page lacks %q", want)
			}
		}
	}
	if !strings.Contains(with, `<meta name="stepseq-csrf" content="c0ffee">`) || !strings.Contains(with, `data-answer="approve"`) {
		t.Error("a page that answers gates lacks its buttons or its CSRF token")
	}
	if strings.Contains(without, `<meta name="stepseq-csrf"`) || strings.Contains(without, `data-answer="approve"`) {
		t.Error("a page without the listener's token shows buttons")
	}
}
