package engine

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// TestWaitsFor checks what status says the plan waits for: the reconcile core's
// decision on a copy of the state, in words, at a fixed time.
func TestWaitsFor(t *testing.T) {
	now := time.Date(2026, 2, 10, 12, 1, 0, 0, time.UTC)
	const steps = `"plan": {"steps": {
		"a": {"title": "A", "instruction": "do a", "requiredOutputs": ["a.txt", "a2.txt"]},
		"b": {"title": "B", "instruction": "do b", "when": "exists(\"go.txt\")"}}},
		"stepQueue": ["a", "b"], "blockers": [], "artifacts": []`
	tests := []struct {
		name  string
		state string // after the plan
		files []string
		lock  bool // a stepseq holds the workspace
		// agent, with lock, is the agent the holder records: this test process,
		// for step "a" or "b", or a pid whose start time does not match ("gone").
		agent string
		want  Waiting
	}{
		{
			name:  "done",
			state: `"currentStep": 2, "stepRuns": {}, "status": "DONE"`,
			want:  Waiting{Action: "idle", Reason: "plan DONE"},
		},
		{
			name:  "cursor past the end",
			state: `"currentStep": 2, "stepRuns": {}, "status": "IN_PROGRESS"`,
			want:  Waiting{Action: "idle", Reason: "plan DONE"},
		},
		{
			name:  "due, outputs listed",
			state: `"currentStep": 0, "stepRuns": {}, "status": "IN_PROGRESS"`,
			files: []string{"a2.txt"},
			want: Waiting{Action: "launch", Step: "a", Reason: "due: the next check or sidecar pass starts try 1",
				MissingOutputs: []string{"a.txt"}},
		},
		{
			name:  "gated",
			state: `"currentStep": 1, "stepRuns": {"a": {"status": "DONE", "tries": 1}}, "status": "IN_PROGRESS"`,
			want:  Waiting{Action: "gated", Step: "b", Reason: `waiting for when: exists("go.txt")`},
		},
		{
			name:  "gate open",
			state: `"currentStep": 1, "stepRuns": {"a": {"status": "DONE", "tries": 1}}, "status": "IN_PROGRESS"`,
			files: []string{"go.txt"},
			want:  Waiting{Action: "launch", Step: "b", Reason: "due: the next check or sidecar pass starts try 1"},
		},
		{
			name: "a DONE step at the cursor moves on",
			state: `"currentStep": 0, "stepRuns": {"a": {"status": "DONE", "tries": 1}}, "status": "IN_PROGRESS",
				"stepDelayMinutes": 5`,
			want: Waiting{Action: "gated", Step: "b", Reason: `waiting for when: exists("go.txt")`},
		},
		{
			name: "delayed",
			state: `"currentStep": 0, "stepRuns": {"a": {"status": "FAILED", "tries": 1, "error": "x",
				"lastRunIso": "2026-02-10T12:00:00.000000+00:00"}}, "status": "IN_PROGRESS", "stepDelayMinutes": 5`,
			want: Waiting{Action: "delayed", Step: "a", Reason: "waiting for stepDelayMinutes until " + ClockTime(now.Add(4*time.Minute), now),
				At: "2026-02-10T12:05:00.000000+00:00", MissingOutputs: []string{"a.txt", "a2.txt"}},
		},
		{
			name:  "blocked",
			state: `"currentStep": 0, "stepRuns": {"a": {"status": "FAILED", "tries": 3, "error": "x"}}, "status": "IN_PROGRESS"`,
			want: Waiting{Action: "blocked", Step: "a", Reason: "a: max retries (3) exceeded",
				MissingOutputs: []string{"a.txt", "a2.txt"}},
		},
		{
			name:  "retry",
			state: `"currentStep": 0, "stepRuns": {"a": {"status": "FAILED", "tries": 1, "error": "x"}}, "status": "IN_PROGRESS"`,
			files: []string{"a.txt", "a2.txt"},
			want:  Waiting{Action: "launch", Step: "a", Reason: "due: the next check or sidecar pass starts try 2"},
		},
		{
			name:  "running under the original runner",
			state: `"currentStep": 0, "stepRuns": {"a": {"status": "IN_PROGRESS", "tries": 2}}, "status": "IN_PROGRESS"`,
			files: []string{"a.txt", "a2.txt"},
			want:  Waiting{Action: "running", Step: "a", Reason: "running (try 2)"},
		},
		{
			name: "running under a live stepseq",
			state: `"currentStep": 0, "stepRuns": {"a": {"status": "IN_PROGRESS", "tries": 1,
				"stepseq": {"startedIso": "2026-02-10T12:00:00.000000+00:00"}}}, "status": "IN_PROGRESS"`,
			files: []string{"a.txt"},
			lock:  true,
			want:  Waiting{Action: "running", Step: "a", Reason: "running (try 1)", MissingOutputs: []string{"a2.txt"}},
		},
		{
			name: "running: the recorded agent is alive",
			state: `"currentStep": 0, "stepRuns": {"a": {"status": "IN_PROGRESS", "tries": 1,
				"stepseq": {"startedIso": "2026-02-10T12:00:00.000000+00:00"}}}, "status": "IN_PROGRESS"`,
			files: []string{"a.txt", "a2.txt"},
			lock:  true,
			agent: "a",
			want:  Waiting{Action: "running", Step: "a", Reason: "running (try 1)"},
		},
		{
			name: "interrupted: the recorded agent's pid was reused",
			state: `"currentStep": 0, "stepRuns": {"a": {"status": "IN_PROGRESS", "tries": 1,
				"stepseq": {"startedIso": "2026-02-10T12:00:00.000000+00:00"}}}, "status": "IN_PROGRESS"`,
			files: []string{"a.txt", "a2.txt"},
			lock:  true,
			agent: "gone",
			want: Waiting{Action: "launch", Step: "a",
				Reason: "interrupted: the agent of try 1 is gone; the next check or sidecar pass starts it again"},
		},
		{
			name: "interrupted: the recorded agent runs another step",
			state: `"currentStep": 0, "stepRuns": {"a": {"status": "IN_PROGRESS", "tries": 1,
				"stepseq": {"startedIso": "2026-02-10T12:00:00.000000+00:00"}}}, "status": "IN_PROGRESS"`,
			files: []string{"a.txt", "a2.txt"},
			lock:  true,
			agent: "b",
			want: Waiting{Action: "launch", Step: "a",
				Reason: "interrupted: the agent of try 1 is gone; the next check or sidecar pass starts it again"},
		},
		{
			name: "interrupted: the agent is gone",
			state: `"currentStep": 0, "stepRuns": {"a": {"status": "IN_PROGRESS", "tries": 1,
				"stepseq": {"startedIso": "2026-02-10T12:00:00.000000+00:00"}}}, "status": "IN_PROGRESS"`,
			files: []string{"a.txt", "a2.txt"},
			want: Waiting{Action: "launch", Step: "a",
				Reason: "interrupted: the agent of try 1 is gone; the next check or sidecar pass starts it again"},
		},
		{
			name: "skipped step",
			state: `"currentStep": 0, "stepRuns": {}, "status": "IN_PROGRESS",
				"plan": {"steps": {"a": {"title": "A", "instruction": "do a", "skip": "true"},
					"b": {"title": "B", "instruction": "do b"}}}`,
			want: Waiting{Action: "launch", Step: "b", Reason: "due: the next check or sidecar pass starts try 1"},
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
			rt.Getenv = agentEnv(os.Args[0]) // an agent that exists: due steps can launch
			if tt.lock {
				lock, _, err := store.TryLock(rt.WS, "watch")
				if err != nil {
					t.Fatal(err)
				}
				defer lock.Unlock()
				if tt.agent != "" {
					ticks, err := proc.StartTicks(os.Getpid())
					if err != nil {
						t.Fatal(err)
					}
					a := &store.AgentHandle{Step: tt.agent, Try: 1, PID: os.Getpid(), StartTicks: ticks}
					if tt.agent == "gone" {
						a.Step, a.StartTicks = "a", ticks+1
					}
					lock.SetAgent(a)
				}
			}
			js := "{" + steps + ", " + tt.state + "}"
			if strings.Contains(tt.state, `"plan"`) { // the case brings its own plan
				js = `{"stepQueue": ["a", "b"], "blockers": [], "artifacts": [], ` + tt.state + "}"
			}
			st := parse(t, js)
			before := st.Marshal()
			got, err := waitsFor(rt, st, now, 3)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("waitsFor (-want +got):\n%s", diff)
			}
			if after := st.Marshal(); !bytes.Equal(before, after) {
				t.Errorf("waitsFor changed the state:\n%s", cmp.Diff(string(before), string(after)))
			}
			// On a state given up (DescribeOwned), with no copy: the same answer.
			owned, err := waitsOn(rt, parse(t, js), now, 3, func(st *planspec.State) *planspec.State { return st })
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, owned); diff != "" {
				t.Errorf("waitsOn without a copy (-want +got):\n%s", diff)
			}
		})
	}
}

// agentEnv is an environment whose STEP_AGENT_CMD is agent.
func agentEnv(agent string) func(string) string {
	return func(k string) string {
		if k == "STEP_AGENT_CMD" {
			return agent
		}
		return ""
	}
}

// TestWaitsFor_CannotLaunch: a due step whose agent cannot start is not "due": the
// report says it cannot launch, and why.
func TestWaitsFor_CannotLaunch(t *testing.T) {
	now := time.Date(2026, 2, 10, 12, 1, 0, 0, time.UTC)
	st := parse(t, `{"plan": {"steps": {"a": {"title": "A", "instruction": "do a"}}}, "stepQueue": ["a"],
		"currentStep": 0, "stepRuns": {}, "blockers": [], "artifacts": [], "status": "IN_PROGRESS", "stepDelayMinutes": 0}`)
	for _, tt := range []struct{ agent, cause string }{
		{"", "STEP_AGENT_CMD is not set"},
		{"no-such-agent-anywhere --flag", `STEP_AGENT_CMD: agent "no-such-agent-anywhere" not found on PATH`},
		{"sh -c", "is a shell"},
	} {
		rt, err := NewRuntime(filepath.Join(t.TempDir(), "state.json"), nil)
		if err != nil {
			t.Fatal(err)
		}
		rt.Getenv = agentEnv(tt.agent)
		got, err := waitsFor(rt, st, now, 3)
		rt.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got.Action != CannotLaunch || !strings.Contains(got.LaunchError, tt.cause) ||
			!strings.HasPrefix(got.Reason, "unable to launch try 1: ") || got.Step != "a" {
			t.Errorf("STEP_AGENT_CMD=%q: %+v, want %s naming %q", tt.agent, got, CannotLaunch, tt.cause)
		}
	}
}

func TestRunDuration(t *testing.T) {
	now := time.Date(2026, 2, 10, 12, 0, 12, 0, time.UTC)
	rec := func(started, finished string) *planspec.AgentRecord {
		return &planspec.AgentRecord{StartedIso: started, FinishedIso: finished}
	}
	tests := []struct {
		name    string
		run     planspec.StepRun
		want    time.Duration
		running bool
		ok      bool
	}{
		{"finished", planspec.StepRun{Status: "DONE", Agent: rec("2026-02-10T11:58:00+00:00", "2026-02-10T11:59:30.5+00:00")}, 90500 * time.Millisecond, false, true},
		{"running", planspec.StepRun{Status: "IN_PROGRESS", Agent: rec("2026-02-10T12:00:00+00:00", "")}, 12 * time.Second, true, true},
		{"no record", planspec.StepRun{Status: "DONE"}, 0, false, false},
		{"failed, never finished", planspec.StepRun{Status: "FAILED", Agent: rec("2026-02-10T12:00:00+00:00", "")}, 0, false, false},
		{"clock went back", planspec.StepRun{Status: "DONE", Agent: rec("2026-02-10T12:00:00+00:00", "2026-02-10T11:00:00+00:00")}, 0, false, true},
		{"bad time", planspec.StepRun{Status: "DONE", Agent: rec("yesterday", "2026-02-10T11:00:00+00:00")}, 0, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, running, ok := runDuration(&tt.run, now)
			if d != tt.want || running != tt.running || ok != tt.ok {
				t.Errorf("runDuration = %v, %v, %v; want %v, %v, %v", d, running, ok, tt.want, tt.running, tt.ok)
			}
		})
	}
}

// TestWaitsForInvalidConditions: a report compiles the conditions of the steps the
// reconcile core reaches and of the step it stops at, and says "invalid" when one
// of them does not compile. Those of later steps are not compiled: on a big state
// that would be most of the report's cost. The sidecar, which compiles them all
// when it adopts a state, runs nothing until they are fixed.
func TestWaitsForInvalidConditions(t *testing.T) {
	now := time.Date(2026, 2, 10, 12, 1, 0, 0, time.UTC)
	invalid := Waiting{Action: "invalid", Reason: "the state's conditions or paths are not valid; nothing runs until they are fixed"}
	tests := []struct {
		name    string
		a, b    string // the conditions of steps a and b
		want    Waiting
		wantErr string
	}{
		{name: "the check of the step waited for", a: `"check": "exist(\"a.txt\")"`, want: invalid,
			wantErr: `plan.steps.a.check: condition "exist(\"a.txt\")": unknown name "exist": did you mean "exists"? (at 1:1)`},
		{name: "its skip", a: `"skip": "size(\"a.txt\")"`, want: invalid,
			wantErr: `plan.steps.a.skip: condition "size(\"a.txt\")": gives int, want true or false`},
		{name: "a step it names is missing", a: `"when": "steps.c.status == \"DONE\""`, want: invalid,
			wantErr: `plan.steps.a.when: no step "c" in plan.steps`},
		{name: "a glob leaves the workspace", b: `"on": ["../**"]`, want: invalid,
			wantErr: `plan.steps.b.on[0]: glob "../**" leaves the workspace`},
		{name: "a later step's condition", b: `"when": "exist(\"b.txt\")"`,
			want: Waiting{Action: "launch", Step: "a", Reason: "due: the next check or sidecar pass starts try 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			rt, err := NewRuntime(filepath.Join(dir, "state.json"), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			rt.Getenv = agentEnv(os.Args[0])
			spec := func(id, extra string) string {
				if extra != "" {
					extra = ", " + extra
				}
				return `"` + id + `": {"title": "T", "instruction": "do"` + extra + `}`
			}
			st := parse(t, `{"plan": {"steps": {`+spec("a", tt.a)+`, `+spec("b", tt.b)+`}},
				"stepQueue": ["a", "b"], "currentStep": 0, "stepRuns": {}, "status": "IN_PROGRESS"}`)
			got, err := waitsFor(rt, st, now, 3)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("waitsFor (-want +got):\n%s", diff)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("err = %v, want none", err)
			case tt.wantErr != "" && (!errors.Is(err, planspec.ErrInvalidState) || !strings.Contains(err.Error(), rt.WS.State+": "+tt.wantErr)):
				t.Errorf("err = %v, want planspec.ErrInvalidState naming the state file and %q", err, tt.wantErr)
			}
		})
	}
}

// TestDescribe checks the step lines of a report, and that a state whose
// conditions do not compile is still reported whole, with its error beside it.
func TestDescribe(t *testing.T) {
	now := time.Date(2026, 2, 10, 12, 1, 0, 0, time.UTC)
	w := newTestWS(t, "")
	rt := w.chain().Runtime
	st := parse(t, `{"stepseq": {"name": "p"}, "plan": {"steps": {
		"a": {"title": "A", "instruction": "x"},
		"b": {"title": "B", "instruction": "y", "when": "exists("},
		"c": {"title": "C", "instruction": "z"}}},
		"stepQueue": ["a", "b", "c"], "currentStep": 1, "stepDelayMinutes": 0,
		"stepRuns": {
			"a": {"status": "DONE", "tries": 2, "error": "first try failed", "lastRunIso": "2026-02-10T11:58:00.000000+00:00",
				"stepseq": {"startedIso": "2026-02-10T11:58:00+00:00", "finishedIso": "2026-02-10T11:59:30.5+00:00"}},
			"b": {"status": "IN_PROGRESS", "tries": 1, "stepseq": {"startedIso": "2026-02-10T12:00:00+00:00"}},
			"c": {"status": "DONE", "tries": 0, "skipped": true}},
		"blockers": ["x"], "artifacts": [], "status": "IN_PROGRESS"}`)
	before := st.Marshal()
	got, err := Describe(rt, st, now, 3)
	if !errors.Is(err, planspec.ErrInvalidState) {
		t.Errorf("err = %v, want planspec.ErrInvalidState", err)
	}
	str := func(s string) *string { return &s }
	ms := func(n int64) *int64 { return &n }
	want := StatusReport{
		Plan: "p", State: rt.WS.State, Status: "IN_PROGRESS", Run: "blocked", Cursor: 1, Blockers: []string{"x"},
		Steps: []StepReport{
			{ID: "a", Title: "A", Status: "DONE", Tries: 2, MaxTries: 3, LastRunIso: str("2026-02-10T11:58:00.000000+00:00"),
				DurationMs: ms(90500), Error: str("first try failed"), Logs: []TryLogPath{}, Phase: "done", Errors: []planspec.TryError{}},
			{ID: "b", Title: "B", Status: "IN_PROGRESS", Tries: 1, MaxTries: 3, Logs: []TryLogPath{}, Phase: "interrupted", Errors: []planspec.TryError{}},
			{ID: "c", Title: "C", Status: "DONE", Skipped: true, MaxTries: 3, Logs: []TryLogPath{}, Phase: "done", Errors: []planspec.TryError{}},
		},
		WaitingFor: Waiting{Action: "invalid", Reason: "the state's conditions or paths are not valid; nothing runs until they are fixed"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Describe (-want +got):\n%s", diff)
	}
	if after := st.Marshal(); !bytes.Equal(before, after) {
		t.Errorf("Describe changed the state:\n%s", cmp.Diff(string(before), string(after)))
	}
	if _, err := os.Stat(w.path(store.MetaDir)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Describe made %s: %v", store.MetaDir, err)
	}
}

// A step left IN_PROGRESS whose agent is gone (stepseq stopped by a Ctrl-C) shows
// interrupted, not running; with its agent alive under a live stepseq, running.
func TestDescribe_InterruptedIsNotRunning(t *testing.T) {
	now := time.Date(2026, 2, 10, 12, 1, 0, 0, time.UTC)
	js := `{"plan": {"steps": {"a": {"title": "A", "instruction": "x"}}}, "stepQueue": ["a"], "currentStep": 0,
		"stepRuns": {"a": {"status": "IN_PROGRESS", "tries": 1, "stepseq": {"startedIso": "2026-02-10T12:00:00+00:00"}}},
		"stepDelayMinutes": 0, "blockers": [], "status": "IN_PROGRESS"}`
	w := newTestWS(t, "")
	rt := w.chain().Runtime
	got, err := Describe(rt, parse(t, js), now, 3)
	if err != nil {
		t.Fatal(err)
	}
	if s := got.Steps[0]; s.Running || s.Phase != PhaseInterrupted || s.DurationMs != nil {
		t.Errorf("no stepseq holds the workspace: running %v phase %q duration %v, want interrupted", s.Running, s.Phase, s.DurationMs)
	}
	lock, _, err := store.TryLock(rt.WS, "watch")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	ticks, err := proc.StartTicks(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	lock.SetAgent(&store.AgentHandle{Step: "a", Try: 1, PID: os.Getpid(), StartTicks: ticks})
	got, err = Describe(rt, parse(t, js), now, 3)
	if err != nil {
		t.Fatal(err)
	}
	if s := got.Steps[0]; !s.Running || s.Phase != "running" {
		t.Errorf("its agent alive: running %v phase %q, want running", s.Running, s.Phase)
	}
}
