package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/listener"
	"github.com/stepseq/stepseq/executor/notify"
	"github.com/stepseq/stepseq/executor/web"
	"github.com/stepseq/stepseq/executor/web/webtest"
)

// TestWorkspace_BrowserSidecar is the whole system: a sidecar runs a gated plan
// with an agent that succeeds at once (`true`), with a notifier, and its live
// page is open in Chromium. Creating the gate file turns the step done on the
// page, and its notification appears, without a reload. Before, the step
// shows as waiting: the plan reached it, and its when: holds it.
func TestWorkspace_BrowserSidecar(t *testing.T) {
	browserSidecar(t, func(h http.Handler) http.Handler { return h }, "/")
}

// TestWorkspace_BrowserToken: behind a token, the page opened once as
// /?token= lands on / with its cookie, and its event stream, which the cookie
// opens, keeps it live.
func TestWorkspace_BrowserToken(t *testing.T) {
	const token = "the-browser-token-0123456789"
	g := listener.NewGuard(token, nil)
	browserSidecar(t, g.Page, "/?token="+token)
}

func browserSidecar(t *testing.T, guard func(http.Handler) http.Handler, path string) {
	browser := webtest.Start(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "plans"), 0o755); err != nil {
		t.Fatal(err)
	}
	plan := "name: gated\nsteps:\n  - id: wait\n    title: Wait for the gate\n    instruction: go\n    when: exists(\"go.txt\")\n"
	if err := os.WriteFile(filepath.Join(dir, "plans", "gated.yaml"), []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("STEP_AGENT_CMD", "true")
	state := filepath.Join(dir, "state.json")
	rt, err := engine.NewRuntime(state, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	pageRT, err := engine.NewRuntime(state, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pageRT.Close()
	src := web.NewWorkspace(pageRT, 3, 0)

	var notes *notify.Notifier
	sc, err := engine.NewSidecar(rt, engine.SidecarOptions{
		Notifier: notifierFunc(func(n core.Notification) { notes.Notify(n) }),
		OnChange: src.Poke,
	})
	if err != nil {
		t.Fatal(err)
	}
	if notes, err = notify.New(notify.Config{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	defer notes.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sidecar: %v", err)
		}
	}()
	if err := src.WatchFeed(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(webtest.Timeout)
	for !sc.Ready() || len(src.View().Steps) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the sidecar did not apply the plan: %+v", src.View())
		}
		time.Sleep(5 * time.Millisecond)
	}
	h := web.New(src, web.Options{MinInterval: 10 * time.Millisecond})
	srv := httptest.NewUnstartedServer(guard(h))
	srv.Config.RegisterOnShutdown(h.Close)
	srv.Start()
	defer srv.Close()
	defer h.Close()

	page := browser.Open(srv.URL+path, true)
	page.WaitLive()
	var at string
	page.Eval(`() => location.pathname + location.search`, nil, &at)
	if at != "/" {
		t.Errorf("the page is at %q, want / (the token out of the address)", at)
	}
	if got := page.Phase("wait"); got != "waiting" {
		t.Fatalf("before the gate the step shows %q, want waiting (its when: is false)", got)
	}
	page.Eval(`() => { window.loadedOnce = true; }`, nil, nil)
	if err := os.WriteFile(filepath.Join(dir, "go.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	page.WaitPhase("wait", "done")
	page.WaitFor("the plan's end among the notifications",
		`() => [...document.querySelectorAll("table.notes td")].some((td) => td.textContent.includes("plan_done"))`, nil)
	var loaded bool
	page.Eval(`() => window.loadedOnce === true`, nil, &loaded)
	if !loaded {
		t.Error("the page reloaded")
	}
	if p := browser.Problems(); len(p) > 0 {
		t.Errorf("the browser reported:\n%v", p)
	}
}

type notifierFunc func(core.Notification)

func (f notifierFunc) Notify(n core.Notification) { f(n) }
