// Package webtest tests the live page of package web in a real browser, as
// net/http/httptest tests handlers: a Go test opens the page in headless
// Chromium, reads a step's phase and colour, waits for what the page shows,
// takes a screenshot and lists the console errors. Behind the page may be a
// fake source or a whole sidecar.
//
// The browser is Debian's chromium at /usr/bin/chromium, driven by npm's
// playwright-core through executor/web/e2e/driver.mjs; `make e2e-deps`
// installs both. A test that needs them fails, never skips, when one is
// missing.
package webtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Chromium is where Debian's package puts the browser.
const Chromium = "/usr/bin/chromium"

// Timeout bounds every wait in the browser; reaching it fails the test.
const Timeout = 10 * time.Second

// Browser is one headless Chromium for one test.
type Browser struct {
	t       testing.TB
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	answers chan answer
	stderr  *strings.Builder
	errMu   sync.Mutex
	next    int
	closed  bool

	exitOnce sync.Once
	exitErr  error
}

type answer struct {
	ID    int             `json:"id"`
	OK    bool            `json:"ok"`
	Value json.RawMessage `json:"value"`
	Error string          `json:"error"`
}

// e2eDir is the folder of the driver and its npm packages, found from this
// file's place in the source tree.
func e2eDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "e2e")
}

// Start launches the browser; the test's cleanup closes it. It fails the test,
// naming `make e2e-deps`, when node, Chromium or playwright-core is missing.
func Start(t testing.TB) *Browser {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("webtest: node is not on PATH: install Node.js 20 or later, then run `make e2e-deps`")
	}
	if _, err := os.Stat(Chromium); err != nil {
		t.Fatalf("webtest: %s is missing: run `make e2e-deps` (it installs Debian's chromium)", Chromium)
	}
	dir := e2eDir()
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core", "package.json")); err != nil {
		t.Fatalf("webtest: %s lacks playwright-core: run `make e2e-deps` (npm ci)", filepath.Join(dir, "node_modules"))
	}
	b := &Browser{t: t, answers: make(chan answer, 1), stderr: &strings.Builder{}}
	b.cmd = exec.Command(node, filepath.Join(dir, "driver.mjs"))
	b.cmd.Env = append(os.Environ(), fmt.Sprintf("WEBTEST_TIMEOUT_MS=%d", Timeout.Milliseconds()))
	b.cmd.Stderr = writerFunc(func(p []byte) (int, error) {
		b.errMu.Lock()
		defer b.errMu.Unlock()
		return b.stderr.Write(p)
	})
	if b.stdin, err = b.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := b.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("webtest: start the driver: %v", err)
	}
	go b.read(stdout)
	t.Cleanup(b.Close)
	b.wait(0, "start the browser", 3*Timeout)
	return b
}

// read hands the driver's answers over until its stdout ends.
func (b *Browser) read(stdout io.Reader) {
	defer close(b.answers)
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 64<<10), 64<<20)
	for lines.Scan() {
		var a answer
		if err := json.Unmarshal(lines.Bytes(), &a); err != nil {
			continue // not an answer: something the driver's packages printed
		}
		b.answers <- a
	}
}

func (b *Browser) wait(id int, what string, limit time.Duration) json.RawMessage {
	b.t.Helper()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		select {
		case a, ok := <-b.answers:
			if !ok {
				b.t.Fatalf("webtest: %s: the driver exited: %v\n%s", what, b.exit(), b.stderrText())
			}
			if a.ID != id {
				continue
			}
			if !a.OK {
				b.t.Fatalf("webtest: %s: %s", what, a.Error)
			}
			return a.Value
		case <-timer.C:
			b.t.Fatalf("webtest: %s: no answer in %v\n%s", what, limit, b.stderrText())
		}
	}
}

// exit waits for the driver, once, after its stdout ended.
func (b *Browser) exit() error {
	b.exitOnce.Do(func() { b.exitErr = b.cmd.Wait() })
	return b.exitErr
}

func (b *Browser) stderrText() string {
	b.errMu.Lock()
	defer b.errMu.Unlock()
	return b.stderr.String()
}

// do sends one request and returns its answer's value.
func (b *Browser) do(what string, req map[string]any) json.RawMessage {
	b.t.Helper()
	if b.closed {
		b.t.Fatalf("webtest: %s: the browser is closed", what)
	}
	b.next++
	req["id"] = b.next
	line, err := json.Marshal(req)
	if err != nil {
		b.t.Fatalf("webtest: %s: %v", what, err)
	}
	if _, err := b.stdin.Write(append(line, '\n')); err != nil {
		b.t.Fatalf("webtest: %s: %v\n%s", what, err, b.stderrText())
	}
	// The driver's own waits end at Timeout; this one is the backstop.
	return b.wait(b.next, what, 2*Timeout)
}

// Problems are the console errors and warnings, uncaught exceptions and
// failed requests of every page so far.
func (b *Browser) Problems() []string {
	b.t.Helper()
	var out []string
	if err := json.Unmarshal(b.do("list problems", map[string]any{"op": "problems"}), &out); err != nil {
		b.t.Fatalf("webtest: problems: %v", err)
	}
	return out
}

// Close closes the browser and waits for the driver to exit.
func (b *Browser) Close() {
	if b.closed {
		return
	}
	b.closed = true
	_ = b.stdin.Close()
	done := make(chan error, 1)
	go func() {
		for range b.answers { // drain until the driver's stdout ends
		}
		done <- b.exit()
	}()
	select {
	case err := <-done:
		if err != nil {
			b.t.Errorf("webtest: the driver exited with %v\n%s", err, b.stderrText())
		}
	case <-time.After(2 * Timeout):
		_ = b.cmd.Process.Kill()
		<-done
		b.t.Errorf("webtest: the driver did not exit\n%s", b.stderrText())
	}
}

// Page is one open tab.
type Page struct {
	b  *Browser
	id int
}

// Open loads url in a new tab of its own context, with or without JavaScript.
func (b *Browser) Open(url string, javascript bool) *Page {
	b.t.Helper()
	var id int
	if err := json.Unmarshal(b.do("open "+url, map[string]any{"op": "open", "url": url, "javascript": javascript}), &id); err != nil {
		b.t.Fatalf("webtest: open %s: %v", url, err)
	}
	return &Page{b: b, id: id}
}

// Eval calls fn, JavaScript source of a function of one argument, with arg in
// the page, and decodes what it returns into result (nil: dropped).
func (p *Page) Eval(fn string, arg, result any) {
	p.b.t.Helper()
	v := p.b.do("evaluate "+fn, map[string]any{"op": "eval", "page": p.id, "fn": fn, "arg": arg})
	if result != nil {
		if err := json.Unmarshal(v, result); err != nil {
			p.b.t.Fatalf("webtest: evaluate %s: %v", fn, err)
		}
	}
}

// WaitFor waits until fn(arg) is truthy in the page; what says what for, in
// the failure.
func (p *Page) WaitFor(what, fn string, arg any) {
	p.b.t.Helper()
	p.b.do("wait for "+what, map[string]any{"op": "waitFor", "page": p.id, "fn": fn, "arg": arg})
}

// Click clicks the first element that selector matches, as a person would.
func (p *Page) Click(selector string) {
	p.b.t.Helper()
	p.b.do("click "+selector, map[string]any{"op": "click", "page": p.id, "selector": selector})
}

// Screenshot saves the whole page as a PNG.
func (p *Page) Screenshot(path string) {
	p.b.t.Helper()
	p.b.do("screenshot", map[string]any{"op": "screenshot", "page": p.id, "path": path})
}

// The live page's markup, as package web draws it.

// WaitLive waits until the page's event stream is open.
func (p *Page) WaitLive() {
	p.b.t.Helper()
	p.WaitFor("the live stream", `() => document.querySelector("#conn.live") !== null`, nil)
}

// stepRow finds a step's row in the steps table by its id, whatever the id holds.
const stepRow = `(id) => [...document.querySelectorAll("tr[data-step]")].find((r) => r.getAttribute("data-step") === id)`

// Phase is a step's phase as the steps table words it ("running", "done", …),
// or "" when the step is not on the page.
func (p *Page) Phase(step string) string {
	p.b.t.Helper()
	var phase string
	p.Eval(`(id) => { const r = (`+stepRow+`)(id); return r ? r.getAttribute("data-phase") : ""; }`, step, &phase)
	return phase
}

// WaitPhase waits until the steps table shows step in phase.
func (p *Page) WaitPhase(step, phase string) {
	p.b.t.Helper()
	p.WaitFor(fmt.Sprintf("step %q to show %q", step, phase),
		`([id, phase]) => { const r = (`+stepRow+`)(id); return r && r.getAttribute("data-phase") === phase; }`,
		[]string{step, phase})
}

// Fill is the colour of a step's box in the graph, as computed: "rgb(…)".
func (p *Page) Fill(step string) string {
	p.b.t.Helper()
	var fill string
	p.Eval(`(id) => {
		const n = [...document.querySelectorAll("svg a.node")].find((a) => a.getAttribute("data-step") === id);
		return n ? getComputedStyle(n.querySelector("rect")).fill : "";
	}`, step, &fill)
	return fill
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
