package web

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/engine"
)

// A run held by its budget: the page says what it spent, its budget and the
// bound that holds it, each step's spend, and wears the BLOCKED badge.
func TestWorkspace_Spend(t *testing.T) {
	dir := t.TempDir()
	state := `{"plan": {"steps": {"a": {"title": "A", "instruction": "do a"}, "b": {"title": "B", "instruction": "do b"}}},
  "stepQueue": ["a", "b"], "currentStep": 1,
  "stepRuns": {"a": {"status": "DONE", "tries": 1, "phase": "done", "stepseq": {"spend": {"tries": 1, "inputTokens": 1200, "outputTokens": 80, "cacheTokens": 5300, "costUsd": 1.2}}}},
  "stepDelayMinutes": 0, "blockers": [], "artifacts": [], "status": "IN_PROGRESS",
  "stepseq": {"name": "spend", "budget": {"usd": 1}, "spend": {"tries": 1, "inputTokens": 1200, "outputTokens": 80, "cacheTokens": 5300, "costUsd": 1.2},
    "budgetHeld": "budget: $1.20 of $1.00 spent (usd)"}}`
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	rt, err := engine.NewRuntime(filepath.Join(dir, "state.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	v := NewWorkspace(rt, 3, 0).View()
	want := "$1.20, 6,580 tokens (1,200 in, 80 out, 5,300 cache), 1 try; budget usd=1; held: budget: $1.20 of $1.00 spent (usd)"
	if v.Spend != want || v.Status != core.RunBlocked || v.Steps[0].Spend != "$1.20, 6,580 tokens (1,200 in, 80 out, 5,300 cache), 1 try" {
		t.Fatalf("view: spend %q, status %s, a's spend %q", v.Spend, v.Status, v.Steps[0].Spend)
	}
	html, _, _, err := New(nil, Options{}).fragment(v)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html, `<p class="fields" data-spend>spend: $1.20, 6,580 tokens`) ||
		!strings.Contains(html, `<div class="muted" data-spend>$1.20, 6,580 tokens`) {
		t.Errorf("the page does not show the spend:\n%s", html)
	}
}
