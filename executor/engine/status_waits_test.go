package engine

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestDescribe_HeldStepWaits: a step the plan reached that may not start yet
// (its when: is false, the step delay runs, its agents wait for a usage limit)
// shows as waiting, with what it waits for in the words of waitingFor; a step
// the plan has not reached, or whose needs are not met, stays planned.
func TestDescribe_HeldStepWaits(t *testing.T) {
	now := time.Date(2026, 2, 10, 12, 1, 0, 0, time.UTC)
	const line = `"plan": {"steps": {
		"a": {"title": "A", "instruction": "do a"},
		"b": {"title": "B", "instruction": "do b", "when": "exists(\"go.txt\")"},
		"c": {"title": "C", "instruction": "do c"}}},
		"stepQueue": ["a", "b", "c"], "blockers": [], "artifacts": [], "status": "IN_PROGRESS"`
	type phase struct{ Phase, Waits string }
	tests := []struct {
		name  string
		state string
		files []string
		want  map[string]phase
	}{
		{
			name:  "when: is false",
			state: `{` + line + `, "currentStep": 1, "stepDelayMinutes": 0, "stepRuns": {"a": {"status": "DONE", "tries": 1}}}`,
			want: map[string]phase{"a": {"done", ""}, "b": {"waiting", `waiting for when: exists("go.txt")`},
				"c": {"planned", ""}},
		},
		{
			name:  "when: is true",
			state: `{` + line + `, "currentStep": 1, "stepDelayMinutes": 0, "stepRuns": {"a": {"status": "DONE", "tries": 1}}}`,
			files: []string{"go.txt"},
			want:  map[string]phase{"a": {"done", ""}, "b": {"planned", ""}, "c": {"planned", ""}},
		},
		{
			name: "the step delay",
			state: `{` + line + `, "currentStep": 0, "stepDelayMinutes": 5,
				"stepRuns": {"a": {"status": "FAILED", "tries": 1, "error": "x", "lastRunIso": "2026-02-10T12:00:00.000000+00:00"}}}`,
			want: map[string]phase{"a": {"waiting", "waiting for stepDelayMinutes until " + ClockTime(now.Add(4*time.Minute), now)},
				"b": {"planned", ""}, "c": {"planned", ""}},
		},
		{
			name: "a usage limit",
			state: `{` + line + `, "currentStep": 0, "stepDelayMinutes": 0,
				"stepRuns": {"a": {"status": "PENDING", "tries": 1, "phase": "waiting",
				"stepseq": {"startedIso": "2026-02-10T11:00:00.000000+00:00", "finishedIso": "2026-02-10T11:00:01.000000+00:00",
				"limit": {"sinceIso": "2026-02-10T11:00:01.000000+00:00", "untilIso": "2026-02-10T13:00:00.000000+00:00",
				"stated": true, "waits": 1, "agent": "claude", "error": "claude: limit reached"}}}}}`,
			want: map[string]phase{"a": {"waiting", "waiting for a usage limit to reset until " + ClockTime(now.Add(59*time.Minute), now) +
				", then try 2 runs again: claude: limit reached"}, "b": {"planned", ""}, "c": {"planned", ""}},
		},
		{
			name: "side by side: each held step, not the needs",
			state: graphPlan("",
				[3]string{"a", `[]`, `"instruction":"do a","when":"exists(\"go.txt\")"`},
				[3]string{"b", `[]`, `"instruction":"do b","when":"exists(\"b.txt\")"`},
				[3]string{"c", `["a","b"]`, `"instruction":"do c"`}),
			want: map[string]phase{"a": {"waiting", `waiting for when: exists("go.txt")`},
				"b": {"waiting", `waiting for when: exists("b.txt")`}, "c": {"planned", ""}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			rt, err := NewRuntime(filepath.Join(dir, "state.json"), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			rt.Getenv = agentEnv(os.Args[0])
			r, err := Describe(rt, parse(t, tt.state), now, 3)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]phase{}
			for _, s := range r.Steps {
				got[s.ID] = phase{s.Phase, s.Waits}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("phases (-want +got):\n%s\nwaitingFor %+v", diff, r.WaitingFor)
			}
		})
	}
}
