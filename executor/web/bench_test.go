package web

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// bigView is a plan of 50 steps, each with a 4 KiB log and a report, and 200
// notifications: more than a plan usually has.
func bigView() View {
	v := View{Plan: "big", Status: "active", Reports: true}
	phases := append([]string(nil), knownPhases...)
	log := strings.Repeat("\x1b[32mok\x1b[0m a line of agent output, as long as many are\n", 4<<10/50)
	for i := range 50 {
		v.Steps = append(v.Steps, StepView{
			ID: fmt.Sprintf("step-%02d", i), Title: "A step with a title of ordinary length",
			Phase: phases[i%len(phases)], Status: "IN_PROGRESS", Tries: 1, DurationMs: ms(time.Duration(i) * time.Second),
			LogTail:    log,
			LastReport: &ReportView{Status: "milestone", Summary: "half way", Evidence: "notes.md", Risk: "low", Next: "finish", Time: at},
		})
	}
	for i := range 200 {
		v.Notifications = append(v.Notifications, NoteView{Time: at, Step: fmt.Sprintf("step-%02d", i%50), Try: 1, Status: "milestone", Output: "half way"})
	}
	return v
}

// BenchmarkHandler_Page is the whole page as a browser loads it.
func BenchmarkHandler_Page(b *testing.B) {
	h := New(newFakeSource(bigView()), Options{})
	var size int
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		size = rec.Body.Len()
	}
	b.ReportMetric(float64(size)/1024, "KiB/page")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/page")
}

// BenchmarkHandler_Update is one update of one open page: the fragment and
// its event, what every change costs per client.
func BenchmarkHandler_Update(b *testing.B) {
	v := bigView()
	h := New(newFakeSource(v), Options{})
	var size int
	for b.Loop() {
		html, title, _, err := h.fragment(v)
		if err != nil {
			b.Fatal(err)
		}
		msg, err := viewEvent(html, title)
		if err != nil {
			b.Fatal(err)
		}
		size = len(msg)
	}
	b.ReportMetric(float64(size)/1024, "KiB/event")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/event")
}

// BenchmarkHandler_FanOut is one change seen by 16 open pages over HTTP: from
// the source's change until every page has its update. The pages share one
// rendering.
func BenchmarkHandler_FanOut(b *testing.B) {
	const pages = 16
	src := newFakeSource(bigView())
	h := New(src, Options{MaxClients: pages, MinInterval: time.Millisecond, Refresh: -1})
	srv := httptest.NewServer(h)
	defer func() {
		h.Close()
		srv.Close()
	}()
	var streams []*stream
	for range pages {
		s, code := openStream(b, srv.URL)
		if code != http.StatusOK {
			b.Fatalf("open a stream: %d", code)
		}
		s.view("big")
		streams = append(streams, s)
	}
	var views int
	for i := 0; b.Loop(); i++ {
		mark := fmt.Sprintf("change %d.", i)
		src.Set(func(v *View) { v.Waiting = mark })
		for _, s := range streams {
			s.viewWhere(mark, func(data string) bool { return strings.Contains(data, mark) })
		}
		views++
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(views)/1000, "ms/change")
}
