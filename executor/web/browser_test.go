package web

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// chromium is where Debian's package puts the browser.
const chromium = "/usr/bin/chromium"

// TestPage_Browser opens the page in headless Chromium, driven by
// e2e/page.test.mjs with playwright-core: the phases' colours, an update
// through the event stream without a reload, and the page without JavaScript.
// It needs Chromium and the e2e folder's npm packages: `make e2e-deps`.
func TestPage_Browser(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not on PATH: install Node.js, then run `make e2e-deps`")
	}
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("%s is missing: run `make e2e-deps` (Debian's chromium)", chromium)
	}
	if _, err := os.Stat(filepath.Join("e2e", "node_modules", "playwright-core", "package.json")); err != nil {
		t.Fatal("e2e/node_modules lacks playwright-core: run `make e2e-deps` (npm ci)")
	}

	v := sampleView()
	v.Steps = append(v.Steps, StepView{
		ID: "gate", Title: "Wait for approval", Phase: PhaseBlocked, Status: "FAILED", Tries: 3,
		Blocker: "retries exhausted", Error: "exit status 3", LogTail: "\x1b[31mfailed\x1b[0m\n",
	}, StepView{
		ID: `<img src=x onerror="window.pwned=1">`, Title: `</td><script>window.pwned=2</script>`,
		Phase: PhasePlanned, Status: "PENDING", LogTail: `<script>window.pwned=3</script>`,
	})
	src := newFakeSource(v)
	states := map[string]func(v *View){
		"accepted": func(v *View) {
			v.Steps[2].Phase = PhaseInProgress
			v.Steps[2].LastReport = &ReportView{Status: "accepted", Summary: "on it", Evidence: "opened paper/draft.md",
				Risk: "low — the outline is thin", Next: "write the draft", Time: at.Add(2 * time.Minute)}
			v.Steps[2].LogTail = "reading study/summary.md\nwriting paper/draft.md\n"
		},
		"done": func(v *View) {
			v.Status, v.Waiting = "DONE", "plan DONE"
			v.Steps[2].Phase, v.Steps[2].Status, v.Steps[2].Running = PhaseDone, "DONE", false
			v.Steps[2].DurationMs = ms(3*time.Minute + 12*time.Second)
			v.Steps[2].LastReport = &ReportView{Status: "done", Summary: "draft written", Evidence: "paper/draft.md",
				Risk: "none", Next: "none", Time: at.Add(5 * time.Minute)}
			v.Steps[3].Phase, v.Steps[3].Status, v.Steps[3].Tries = PhaseDispatching, "IN_PROGRESS", 1
			v.Notifications = append(v.Notifications, NoteView{Time: at.Add(5 * time.Minute), Step: "paper", Try: 1,
				Status: "done", Output: "draft written", Next: "none"})
		},
	}
	_, srv := serve(t, src, Options{MinInterval: 10 * time.Millisecond})

	shot := filepath.Join(t.ArtifactDir(), "page.png")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("e2e", "page.test.mjs"), srv.URL+"/", shot)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		line := lines.Text()
		name, ok := strings.CutPrefix(line, "STATE ")
		if !ok {
			t.Log("browser:", line)
			continue
		}
		set := states[name]
		if set == nil {
			t.Errorf("the browser asked for an unknown state %q", name)
			break
		}
		src.Set(set)
		if _, err := fmt.Fprintf(stdin, "OK %s\n", name); err != nil {
			t.Errorf("tell the browser: %v", err)
			break
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the browser checks failed (%v):\n%s", err, stderr.String())
	}
	t.Logf("the browser checks took %v; screenshot %s", time.Since(start).Round(time.Millisecond), shot)
}
