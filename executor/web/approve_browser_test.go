package web_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/listener"
	"github.com/stepseq/stepseq/executor/notify"
	"github.com/stepseq/stepseq/executor/web"
	"github.com/stepseq/stepseq/executor/web/webtest"
)

// TestWorkspace_BrowserApproval is the whole system: a sidecar runs a plan
// whose two steps each wait for a person's yes, its live page behind the
// listener's token, open in Chromium. The page shows the first gate's
// question; its Approve button, with a note typed, starts the step, which
// turns done without a reload. The second gate's Reject button blocks its
// step with the note as the blocker. Each answer is journaled as the page's
// (face web).
func TestWorkspace_BrowserApproval(t *testing.T) {
	browser := webtest.Start(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "plans"), 0o755); err != nil {
		t.Fatal(err)
	}
	plan := "name: release\nsteps:\n" +
		"  - {id: build, title: Build it, instruction: build, approve: true}\n" +
		"  - {id: ship, title: Ship it, instruction: ship to production, approve: true}\n"
	if err := os.WriteFile(filepath.Join(dir, "plans", "release.yaml"), []byte(plan), 0o644); err != nil {
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
	for src.View().Gate == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the sidecar did not ask for the first yes: %+v", src.View())
		}
		time.Sleep(5 * time.Millisecond)
	}
	const token = "the-approving-token-0123456789"
	h := web.New(src, web.Options{MinInterval: 10 * time.Millisecond, Gates: src, CSRF: listener.CSRFToken(token)})
	srv := httptest.NewUnstartedServer(listener.NewGuard(token, nil).Page(h))
	srv.Config.RegisterOnShutdown(h.Close)
	srv.Start()
	defer srv.Close()
	defer h.Close()

	page := browser.Open(srv.URL+"/?token="+token, true)
	page.WaitLive()
	if got := page.Phase("build"); got != "awaiting approval" {
		t.Fatalf("before the yes, build shows %q", got)
	}
	var question string
	page.Eval(`() => document.querySelector("section.gate [data-question]").textContent`, nil, &question)
	if question != "approval asked before step build runs: Build it — build" {
		t.Errorf("the page asks %q", question)
	}
	type_ := func(note string) {
		page.Eval(`(v) => { const n = document.querySelector("[data-note]"); n.value = v; n.dispatchEvent(new Event("input", {bubbles: true})); }`, note, nil)
	}
	type_("looks right")
	page.Screenshot(filepath.Join(t.ArtifactDir(), "approval-asked.png"))
	page.Click(`section.gate button[data-answer="approve"]`)
	page.WaitPhase("build", "done")
	page.WaitFor("the answer said", `() => document.querySelector("#answer-said.ok")?.textContent.startsWith("approved step build's gate")`, nil)

	page.WaitPhase("ship", "awaiting approval")
	page.WaitFor("ship's gate", `() => document.querySelector('section.gate[data-gate="ship"] button[data-answer="reject"]') !== null`, nil)
	type_("not on a Friday")
	page.Click(`section.gate button[data-answer="reject"]`)
	page.WaitPhase("ship", "blocked")
	page.WaitFor("the blocker with the note",
		`() => [...document.querySelectorAll("ul.blockers li")].some((li) => li.textContent.includes("ship: rejected by page at 127.0.0.1 (web): not on a Friday"))`, nil)
	var gone bool
	page.Eval(`() => document.querySelector("section.gate") === null`, nil, &gone)
	if !gone {
		t.Error("the gate is still shown after the reject")
	}
	journal, err := os.ReadFile(filepath.Join(dir, ".stepseq", "journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"event":"approved","step":"build","reason":"looks right"`, `"event":"rejected","step":"ship","reason":"not on a Friday"`, `"face":"web"`} {
		if !strings.Contains(string(journal), want) {
			t.Errorf("the journal lacks %s:\n%s", want, journal)
		}
	}
	page.Screenshot(filepath.Join(t.ArtifactDir(), "approval.png"))
	if p := browser.Problems(); len(p) > 0 {
		t.Errorf("the browser reported:\n%v", p)
	}
}
