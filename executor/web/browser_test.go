package web

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/web/webtest"
)

// fills are the phases' colours in the graph, as the page's style sheet gives
// them.
var fills = map[string]string{
	"planned":     "rgb(238, 240, 243)",
	"dispatching": "rgb(254, 243, 199)",
	"in progress": "rgb(219, 234, 254)",
	"running":     "rgb(219, 234, 254)",
	"reviewing":   "rgb(237, 233, 254)",
	"done":        "rgb(220, 252, 231)",
	"blocked":     "rgb(254, 226, 226)",
}

// TestPage_Browser opens the page in headless Chromium: every step in its
// phase's colour; updates through the event stream, without a reload, as a
// step goes dispatching → in progress → done and a notification arrives; and
// the same content without JavaScript. Hostile text runs nothing, and the
// console stays clean. The screenshot is kept with go test -artifacts.
func TestPage_Browser(t *testing.T) {
	browser := webtest.Start(t)

	const evil = `<img src=x onerror="window.pwned=1">`
	v := sampleView()
	v.Steps = append(v.Steps, StepView{
		ID: "gate", Title: "Wait for approval", Phase: PhaseBlocked, Status: "FAILED", Tries: 3,
		Blocker: "retries exhausted", Error: "exit status 3", LogTail: "\x1b[31mfailed\x1b[0m\n",
	}, StepView{
		ID: evil, Title: `</td><script>window.pwned=2</script>`, Phase: PhasePlanned, Status: "PENDING",
		LogTail: `<script>window.pwned=3</script>`,
	})
	src := newFakeSource(v)
	_, srv := serve(t, src, Options{MinInterval: 10 * time.Millisecond})
	start := time.Now()

	page := browser.Open(srv.URL+"/", true)
	page.WaitLive()
	want := map[string]string{"research": "done", "outline": "reviewing", "paper": "dispatching", "review": "planned", "gate": "blocked", evil: "planned"}
	for id, phase := range want {
		if got := page.Phase(id); got != phase {
			t.Errorf("step %q shows %q, want %q", id, got, phase)
		}
		if got := page.Fill(id); got != fills[phase] {
			t.Errorf("step %q is drawn in %s, want %s (%s)", id, got, fills[phase], phase)
		}
	}
	// A reload would drop this mark and close the log the reader opened.
	page.Eval(`() => { window.loadedOnce = true; }`, nil, nil)
	page.Click(`details.log[data-log="research"] > summary`)

	src.Set(func(v *View) {
		v.Steps[2].Phase = PhaseInProgress
		v.Steps[2].LastReport = &ReportView{Status: "accepted", Summary: "on it", Evidence: "opened paper/draft.md",
			Risk: "low — the outline is thin", Next: "write the draft", Time: at.Add(2 * time.Minute)}
		v.Steps[2].LogTail = "reading study/summary.md\nwriting paper/draft.md\n"
	})
	page.WaitPhase("paper", "in progress")
	if got := page.Fill("paper"); got != fills["in progress"] {
		t.Errorf("step paper in progress is drawn in %s", got)
	}

	src.Set(func(v *View) {
		v.Status, v.Waiting = "done", "plan DONE"
		v.Steps[2].Phase, v.Steps[2].Status, v.Steps[2].Running = PhaseDone, "DONE", false
		v.Steps[2].DurationMs = ms(3*time.Minute + 12*time.Second)
		v.Steps[2].LastReport = &ReportView{Status: "done", Summary: "draft written", Evidence: "paper/draft.md",
			Risk: "none", Next: "none", Time: at.Add(5 * time.Minute)}
		v.Steps[3].Phase, v.Steps[3].Status, v.Steps[3].Tries = PhaseDispatching, "IN_PROGRESS", 1
		v.Notifications = append(v.Notifications, NoteView{Time: at.Add(5 * time.Minute), Step: "paper", Try: 1,
			Status: "done", Output: "draft written", Next: "none"})
	})
	page.WaitPhase("paper", "done")
	page.WaitFor("the new notification", `(text) => [...document.querySelectorAll("table.notes td")].some((td) => td.textContent === text)`, "draft written")
	var after struct {
		Loaded, LogOpen bool
		Pwned           any
		Title           string
	}
	page.Eval(`() => ({
		loaded: window.loadedOnce === true,
		logOpen: document.querySelector('details.log[data-log="research"]').open,
		pwned: window.pwned ?? null,
		title: document.title,
	})`, nil, &after)
	if !after.Loaded {
		t.Error("the page reloaded")
	}
	if !after.LogOpen {
		t.Error("the log the reader opened closed on an update")
	}
	if after.Pwned != nil {
		t.Errorf("hostile text ran script: window.pwned = %v", after.Pwned)
	}
	if after.Title != "done · research-paper · stepseq" {
		t.Errorf("the title is %q", after.Title)
	}
	if got, want := page.Phase("review"), "dispatching"; got != want {
		t.Errorf("step review shows %q, want %q", got, want)
	}
	shot := filepath.Join(t.ArtifactDir(), "page.png")
	page.Screenshot(shot)

	// Without JavaScript the page is all there, as the server drew it.
	plain := browser.Open(srv.URL+"/", false)
	want["paper"], want["review"] = "done", "dispatching"
	for id, phase := range want {
		if got := plain.Phase(id); got != phase {
			t.Errorf("without JavaScript step %q shows %q, want %q", id, got, phase)
		}
	}
	var static struct {
		Conn  string
		Nodes int
		Notes string
	}
	plain.Eval(`() => ({
		conn: document.querySelector("#conn").textContent,
		nodes: document.querySelectorAll("svg a.node").length,
		notes: document.querySelector("table.notes").textContent,
	})`, nil, &static)
	if static.Conn != "static page: reload to update" || static.Nodes != len(want) {
		t.Errorf("without JavaScript: %+v", static)
	}

	if p := browser.Problems(); len(p) > 0 {
		t.Errorf("the browser reported:\n%v", p)
	}
	t.Logf("the browser checks took %v; screenshot %s", time.Since(start).Round(time.Millisecond), shot)
}
