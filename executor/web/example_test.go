package web_test

import (
	"net/http"
	"sync"

	"github.com/stepseq/stepseq/executor/web"
)

// workspace is a Source: whoever learns of a change (a state written, a
// report, a notification) calls Update with the new view.
type workspace struct {
	web.Signal
	mu sync.Mutex
	v  web.View
}

func (w *workspace) View() web.View {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.v
}

func (w *workspace) Update(v web.View) {
	w.mu.Lock()
	w.v = v
	w.mu.Unlock()
	w.Notify()
}

// The page beside the probes: / and /events go to the page, the rest to their
// own handlers. Shutdown ends the page's event streams first, so that it does
// not wait for them.
func ExampleNew() {
	ws := &workspace{}
	page := web.New(ws, web.Options{})
	mux := http.NewServeMux()
	mux.Handle("/healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	mux.Handle("/", page) // serves / and /events; 404 for the rest
	srv := &http.Server{Handler: mux}
	srv.RegisterOnShutdown(page.Close)

	ws.Update(web.View{Plan: "demo", Status: "active", Steps: []web.StepView{{ID: "research", Phase: web.PhaseDispatching}}})
}
