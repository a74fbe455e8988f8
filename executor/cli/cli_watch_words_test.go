package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// TestWatch_SaysWhatItWaitsFor: a sidecar started on an empty folder says where
// it looks, that no plan is there yet (and which file is one in the wrong place),
// that no agent is set, and where it listens.
func TestWatch_SaysWhatItWaitsFor(t *testing.T) {
	t.Setenv("STEP_AGENT_CMD", "")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "myplan.yaml"), []byte("steps:\n  - id: a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"watch", "--listen", "127.0.0.1:0", dir}, io.Discard, &logs) }()
	want := []string{
		"plans=" + filepath.Join(dir, "plans"),
		"no plan yet: drop one in plans/",
		"STEP_AGENT_CMD is not set and no plan names an agent",
		"url=http://127.0.0.1:",
		`msg="a plan in the wrong place is not read" file=myplan.yaml fix="plans are read from plans/: move it to plans/myplan.yaml"`,
	}
	waitFor(t, "the start's words", func() bool {
		for _, w := range want {
			if !strings.Contains(logs.String(), w) {
				return false
			}
		}
		return true
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("watch: %v", err)
	}
	if n := strings.Count(logs.String(), "STEP_AGENT_CMD is not set"); n != 1 {
		t.Errorf("the agent warning came %d times, want once:\n%s", n, logs.String())
	}

	// A plan that names its agent needs no STEP_AGENT_CMD: no warning.
	dir = t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "plans"), 0o755); err != nil {
		t.Fatal(err)
	}
	plan := "agent: claude\nsteps:\n  - id: a\n    title: A\n    instruction: x\n    when: exists(\"never\")\n"
	if err := os.WriteFile(filepath.Join(dir, "plans", "p.yaml"), []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	var quiet syncBuffer
	ctx, cancel = context.WithCancel(t.Context())
	go func() { done <- run(ctx, []string{"watch", dir}, io.Discard, &quiet) }()
	waitFor(t, "watching", func() bool { return strings.Contains(quiet.String(), "msg=watching") })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("watch: %v", err)
	}
	if s := quiet.String(); strings.Contains(s, "STEP_AGENT_CMD is not set") || strings.Contains(s, "no plan yet") {
		t.Errorf("warned though the plan names its agent:\n%s", s)
	}
}

func TestWatch_NegativeGraceIsRefused(t *testing.T) {
	err := run(t.Context(), []string{"watch", "--grace", "-1s", t.TempDir()}, io.Discard, io.Discard)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), "--grace -1s") {
		t.Fatalf("watch --grace -1s: %v, want a usage error naming --grace", err)
	}
}

func TestBuildVersion(t *testing.T) {
	stamped := &debug.BuildInfo{Main: debug.Module{Path: "github.com/stepseq/stepseq", Version: "v1.2.3"}}
	devel := &debug.BuildInfo{Main: debug.Module{Path: "github.com/stepseq/stepseq", Version: "(devel)"}}
	for _, c := range []struct {
		set  string
		info *debug.BuildInfo
		ok   bool
		want string
	}{
		{"v0.9.0-3-gabc", stamped, true, "v0.9.0-3-gabc"}, // make build's -ldflags win
		{"dev", stamped, true, "v1.2.3"},                  // go install …@v1.2.3
		{"dev", devel, true, "dev"},
		{"dev", nil, false, "dev"},
	} {
		if got := buildVersion(c.set, c.info, c.ok); got != c.want {
			t.Errorf("buildVersion(%q, %v) = %q, want %q", c.set, c.info, got, c.want)
		}
	}
}

// A rejected edit of the active plan is in status's rejected plans, as list shows
// it: the plan runs on, its edit's errors named.
func TestStatus_NamesARejectedEditOfTheActivePlan(t *testing.T) {
	t.Setenv("STEP_AGENT_CMD", "true") // never launched: the step waits on a file that never comes
	dir := t.TempDir()
	plan := filepath.Join(dir, "plans", "p.yaml")
	if err := os.MkdirAll(filepath.Dir(plan), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(text string) {
		if err := os.WriteFile(plan, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("steps:\n  - id: a\n    title: A\n    instruction: x\n    when: exists(\"never\")\n")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"watch", dir}, io.Discard, io.Discard) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "the plan applied", func() bool { _, err := os.Stat(filepath.Join(dir, "state.json")); return err == nil })
	write("steps:\n  - id: a\n    titel: A\n")
	var out bytes.Buffer
	waitFor(t, "the edit judged", func() bool {
		out.Reset()
		_ = run(t.Context(), []string{"list", "--json", dir}, &out, io.Discard)
		return strings.Contains(out.String(), `"errorCount"`)
	})
	out.Reset()
	_ = run(t.Context(), []string{"status", "--json", dir}, &out, io.Discard)
	var st struct {
		RejectedPlans []struct {
			File   string   `json:"file"`
			Errors []string `json:"errors"`
		} `json:"rejectedPlans"`
	}
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out.String())
	}
	if len(st.RejectedPlans) != 1 || st.RejectedPlans[0].File != "plans/p.yaml" || len(st.RejectedPlans[0].Errors) == 0 {
		t.Errorf("rejectedPlans %+v, want plans/p.yaml with its errors", st.RejectedPlans)
	}
}

// The status table's columns line up whatever the titles are written in: a CJK
// character or an emoji takes two columns of a terminal.
func TestStatus_WideTitlesKeepTheColumns(t *testing.T) {
	dir := t.TempDir()
	js := `{"plan": {"steps": {"a": {"title": "研究する", "instruction": "x"}, "b": {"title": "Ship 🚀", "instruction": "y"}, "c": {"title": "plain", "instruction": "z"}}},
		"stepQueue": ["a", "b", "c"], "currentStep": 0, "stepRuns": {}, "stepDelayMinutes": 0, "blockers": [], "status": "IN_PROGRESS"}`
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	_ = run(t.Context(), []string{"status", dir}, &out, io.Discard)
	col := -1
	for line := range strings.Lines(out.String()) {
		i := strings.Index(line, "PENDING")
		if i < 0 {
			continue
		}
		at := displayWidth(line[:i])
		if col >= 0 && at != col {
			t.Errorf("the STATUS column starts at %d here, %d above:\n%s", at, col, out.String())
		}
		col = at
	}
	if col < 0 {
		t.Fatalf("no rows:\n%s", out.String())
	}
	if got := displayWidth("研究する🚀é"); got != 11 {
		t.Errorf("displayWidth = %d, want 11", got)
	}
}

// list's table and list --json say each plan's status in the same word, the one
// status and the docs use (active, queued, rejected, finished, new), and name the
// plan by its name:, as status and history do.
func TestList_TableAndJSONAgree(t *testing.T) {
	dir := t.TempDir()
	plans := map[string]string{
		"good.yaml": "name: shiny\nsteps:\n  - id: a\n    title: A\n    instruction: x\n",
		"bad.yaml":  "name: broken\nsteps:\n  - id: a\n    titel: A\n",
	}
	if err := os.MkdirAll(filepath.Join(dir, "plans"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range plans {
		if err := os.WriteFile(filepath.Join(dir, "plans", name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var table, js bytes.Buffer
	if err := run(t.Context(), []string{"list", dir}, &table, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := run(t.Context(), []string{"list", "--json", dir}, &js, io.Discard); err != nil {
		t.Fatal(err)
	}
	var listed []struct{ Name, File, Status string }
	if err := json.Unmarshal(js.Bytes(), &listed); err != nil {
		t.Fatalf("list --json: %v\n%s", err, js.String())
	}
	// A plan that does not parse is named by its file, as the sidecar names it.
	want := map[string]string{"bad": "rejected", "shiny": "new"}
	if len(listed) != len(want) {
		t.Fatalf("list --json: %d plans, want %d\n%s", len(listed), len(want), js.String())
	}
	for _, p := range listed {
		if want[p.Name] != p.Status {
			t.Errorf("list --json: plan %q is %q, want %q", p.Name, p.Status, want[p.Name])
		}
		row := ""
		for _, line := range strings.Split(table.String(), "\n") {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == p.Name {
				row = f[2]
			}
		}
		if row != p.Status {
			t.Errorf("plan %q: the table says %q, --json %q\n%s", p.Name, row, p.Status, table.String())
		}
	}
}
