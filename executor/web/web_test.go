package web

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func get(t *testing.T, h http.Handler, method, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}

func TestHandler_PageWithoutScript(t *testing.T) {
	v := sampleView()
	v.Blockers = []string{"paper: launch timeout"}
	rec := get(t, New(newFakeSource(v), Options{}), http.MethodGet, "/")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET / = %d", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'sha256-") {
		t.Errorf("Content-Security-Policy %q names no script hash", csp)
	}
	body := rec.Body.String()
	want := []string{
		"research-paper", `class="plan-status st-active" data-plan-status>active<`, "running (try 1)", "paper: launch timeout",
		// every step, in the graph and the table, with its phase
		`data-step="research" data-phase="done"`, `data-step="outline" data-phase="reviewing"`,
		`data-step="paper" data-phase="dispatching"`, `data-step="review" data-phase="planned"`,
		`<text class="id" x="22" y="30">research</text>`, `class="node ph-reviewing"`,
		"Outline the paper", "1m34s", "12.0s", "800ms", "try 1: missing output paper/outline.md",
		// the last report, the logs, the notifications
		"Summary written", "study/summary.md", `data-log="research"`, "wrote study/summary.md",
		"agent launched", "wait for accepted",
		// a running duration the script ticks
		`data-running-ms="800"`,
	}
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("the page lacks %q", w)
		}
	}
	// Newest notification first.
	if i, j := strings.Index(body, "agent launched"), strings.Index(body, "<td>Summary written</td>"); i < 0 || j < 0 || i > j {
		t.Errorf("notifications not newest first: %d, %d", i, j)
	}
}

func TestHandler_InProgressWithoutReportsReadsRunning(t *testing.T) {
	v := sampleView()
	v.Reports = false
	v.Steps[2].Phase = PhaseInProgress
	body := get(t, New(newFakeSource(v), Options{}), http.MethodGet, "/").Body.String()
	if !strings.Contains(body, `data-step="paper" data-phase="running"`) {
		t.Error("an in_progress step of a plan without reports is not shown as running")
	}
	v.Reports = true
	body = get(t, New(newFakeSource(v), Options{}), http.MethodGet, "/").Body.String()
	if !strings.Contains(body, `data-step="paper" data-phase="in progress"`) {
		t.Error("an in_progress step of a plan with reports is not shown as in progress")
	}
}

// A step waiting out a usage limit shows as waiting, in its own colour, with
// the time in what the plan waits for.
func TestHandler_LimitWaitShowsWaiting(t *testing.T) {
	v := sampleView()
	v.Steps[2].Phase = PhaseWaiting
	v.Waiting = "waiting for a usage limit to reset until 15:00:00, then try 2 runs again"
	body := get(t, New(newFakeSource(v), Options{}), http.MethodGet, "/").Body.String()
	if !strings.Contains(body, `data-step="paper" data-phase="waiting"`) || !strings.Contains(body, "ph-waiting") || !strings.Contains(body, "until 15:00:00") {
		t.Error("a step held by a usage limit is not shown waiting with its time")
	}
}

func TestHandler_HostileInputEscaped(t *testing.T) {
	evil := []string{
		`<script>alert(1)</script>`,
		`"><img src=x onerror=alert(2)>`,
		`</title><script>alert(3)</script>`,
		`</textarea></pre><svg onload=alert(4)>`,
		`javascript:alert(5)`,
		"]]><!--",
	}
	v := sampleView()
	v.Plan, v.Status, v.Waiting = evil[0], evil[2], evil[1]
	v.Blockers = evil
	for i, e := range evil {
		v.Steps = append(v.Steps, StepView{
			ID: e, Title: e, Phase: e, Status: e, Error: e, Blocker: e, LogTail: e + "\n" + e,
			LastReport: &ReportView{Status: e, Summary: e, Evidence: e, Risk: e, Next: e},
		})
		v.Notifications = append(v.Notifications, NoteView{Step: e, Try: i, Status: e, Output: e, Next: e})
		v.Edges = append(v.Edges, [2]string{"research", e})
	}
	for _, path := range []string{"/", "/events"} {
		var body string
		if path == "/" {
			body = get(t, New(newFakeSource(v), Options{}), http.MethodGet, "/").Body.String()
		} else {
			html, _, _, err := New(newFakeSource(v), Options{}).fragment(v)
			if err != nil {
				t.Fatal(err)
			}
			body = html
		}
		for _, e := range evil[:4] {
			if strings.Contains(body, e) {
				t.Errorf("%s: %q is on the page unescaped", path, e)
			}
		}
		if n := strings.Count(strings.ToLower(body), "<script"); n > 1 || (path == "/events" && n > 0) {
			t.Errorf("%s: %d script elements", path, n)
		}
		if strings.Contains(body, `href="javascript:`) {
			t.Errorf("%s: a javascript: link", path)
		}
		if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("%s: the hostile id is not shown escaped", path)
		}
	}
}

func TestHandler_Routes(t *testing.T) {
	h := New(newFakeSource(sampleView()), Options{})
	for _, c := range []struct {
		method, path string
		code         int
	}{
		{http.MethodGet, "/", http.StatusOK},
		{http.MethodHead, "/", http.StatusOK},
		{http.MethodPost, "/", http.StatusMethodNotAllowed},
		{http.MethodPost, "/events", http.StatusMethodNotAllowed},
		{http.MethodGet, "/index.html", http.StatusNotFound},
		{http.MethodGet, "/events/x", http.StatusNotFound},
	} {
		t.Run(c.method+c.path, func(t *testing.T) {
			rec := get(t, h, c.method, c.path)
			if rec.Code != c.code {
				t.Errorf("%s %s = %d, want %d", c.method, c.path, rec.Code, c.code)
			}
			if c.method == http.MethodHead {
				if b, _ := io.ReadAll(rec.Body); len(b) != 0 {
					t.Errorf("HEAD has a body of %d bytes", len(b))
				}
			}
		})
	}
}

func TestHandler_PageShowsTheNewestNotifications(t *testing.T) {
	v := sampleView()
	v.Notifications = nil
	for i := range maxNotes + 5 {
		v.Notifications = append(v.Notifications, NoteView{Step: "research", Try: 1, Status: "milestone", Output: fmt.Sprintf("note %d.", i)})
	}
	body := get(t, New(newFakeSource(v), Options{}), http.MethodGet, "/").Body.String()
	if strings.Contains(body, "note 4.") || !strings.Contains(body, "note 5.") || !strings.Contains(body, fmt.Sprintf("note %d.", maxNotes+4)) {
		t.Error("the page does not show the newest notifications only")
	}
	if !strings.Contains(body, "and 5 earlier") {
		t.Error("the page does not say how many it left out")
	}
}

func TestHandler_PageWithoutState(t *testing.T) {
	body := get(t, New(newFakeSource(View{}), Options{}), http.MethodGet, "/").Body.String()
	for _, w := range []string{"no plan", "no state", "No plan yet.", "No steps.", "No notifications yet."} {
		if !strings.Contains(body, w) {
			t.Errorf("an empty page lacks %q", w)
		}
	}
	if strings.Contains(body, "<svg") {
		t.Error("an empty page draws a graph")
	}
}
