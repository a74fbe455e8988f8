package planspec

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ReadStateBytes reads a state as ParseState does, without remembering its
// encoding for a write; written all the same, it says what ParseState's says
// (encoded in full, a plan's escapes may differ).
func TestReadStateBytes(t *testing.T) {
	const withRuns = `{"plan": {"steps": {
    "a": {"title": "A", "instruction": "x", "check": "exists(\"a.md\")", "custom": {"kept": [1, 2]}},
    "b": {"title": "B \u00e9", "instruction": "y", "requiredOutputs": ["b.md"], "retries": 2}}, "extra": true},
  "stepQueue": ["a", "b"], "currentStep": 1,
  "stepRuns": {"a": {"status": "DONE", "tries": 1, "lastRunIso": "2026-02-10T12:00:00.000000+00:00", "note": "kept"}},
  "stepDelayMinutes": 0, "blockers": [], "artifacts": [], "status": "IN_PROGRESS", "unknown": {"x": null}}`
	for _, in := range []string{handWrittenState, withRuns} {
		parsed, err := ParseState(strings.NewReader(in), "state.json")
		if err != nil {
			t.Fatal(err)
		}
		want := parsed.Marshal()
		read, err := ReadStateBytes([]byte(in), "state.json")
		if err != nil {
			t.Fatal(err)
		}
		if read.memo.planSteps != nil || read.memo.runs != nil {
			t.Errorf("the encoding was remembered")
		}
		var got, same any
		if err := json.Unmarshal(read.Marshal(), &got); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(want, &same); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(same, got); diff != "" {
			t.Errorf("written (-ParseState's +got):\n%s", diff)
		}
	}
	if _, err := ReadStateBytes([]byte(`{"stepQueue": ["x"]}`), "state.json"); err == nil ||
		err.Error() != `state.json: stepQueue[0]: step "x" is queued but missing from plan.steps: add it there or remove it from stepQueue` {
		t.Errorf("err = %v", err)
	}
}

// A run's try record of the wrong shape is named with what the decoder says.
func TestParseState_BadTryRecord(t *testing.T) {
	const bad = `{"plan": {"steps": {"a": {"title": "A", "instruction": "x"}}}, "stepQueue": ["a"],
  "stepRuns": {"a": {"status": "DONE", "stepseq": {"startedIso": 5, "errors": [{"try": "x"}]}}}}`
	_, err := ParseState(strings.NewReader(bad), "state.json")
	want := `state.json: stepRuns.a.stepseq: want stepseq's try record {startedIso, finishedIso, interruptions}: ` +
		`json: cannot unmarshal number into Go struct field AgentRecord.startedIso of type string`
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}

// TestParseState_NULStepID: a step id that no agent can be given is refused when
// the state is read, naming it, rather than at each launch, spending the tries.
func TestParseState_NULStepID(t *testing.T) {
	js := `{"plan":{"steps":{"a\u0000b":{"title":"A","instruction":"x"}}},"stepQueue":["a\u0000b"],"currentStep":0}`
	_, err := ParseState(strings.NewReader(js), "state.json")
	want := `state.json: plan.steps: step id "a\x00b" contains a NUL byte, which no agent can be given: rename the step (and its stepQueue entry)`
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}

// TestParseState_RequiredOutputsSnakeCase: the original's runner reads a step's
// required_outputs when requiredOutputs is absent, so stepseq does too: such a
// step is not DONE without its outputs. The state is written back with the
// spelling it was read with, and requiredOutputs wins when both are there.
func TestParseState_RequiredOutputsSnakeCase(t *testing.T) {
	const js = `{"plan":{"steps":{"a":{"title":"A","instruction":"do a","required_outputs":["out/a.md"]},
 "b":{"title":"B","instruction":"do b","requiredOutputs":["b.md"],"required_outputs":["other.md"]}}},
 "stepQueue":["a","b"],"currentStep":0,"stepRuns":{},"stepDelayMinutes":0,"blockers":[],"status":"IN_PROGRESS"}`
	st, err := ParseState(strings.NewReader(js), "state.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Steps["a"].RequiredOutputs; len(got) != 1 || got[0] != "out/a.md" {
		t.Errorf("a's required_outputs read as %q", got)
	}
	if got := st.Steps["b"].RequiredOutputs; len(got) != 1 || got[0] != "b.md" {
		t.Errorf("b's outputs read as %q, want requiredOutputs' [b.md]", got)
	}
	out := string(st.Marshal())
	if !strings.Contains(out, `"required_outputs": [`) && !strings.Contains(out, `"required_outputs":[`) {
		t.Errorf("a's spelling lost on write:\n%s", out)
	}
	back, err := ParseState(strings.NewReader(out), "state.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Steps["a"].RequiredOutputs; len(got) != 1 || got[0] != "out/a.md" {
		t.Errorf("after a round trip a's outputs are %q", got)
	}
	if strings.Count(out, "requiredOutputs") != 1 {
		t.Errorf("requiredOutputs added to a step that had required_outputs:\n%s", out)
	}
}

// A state.json written by hand, with stepseq's keys in plan.steps.
const handWrittenState = `{
  "plan": {"steps": {
    "research": {"title": "Research", "instruction": "Write study/summary.md", "requiredOutputs": ["study/summary.md"]},
    "paper": {"title": "Paper", "instruction": "Write paper/draft.md",
      "when": "steps.research.status == \"DONE\" && exists(\"approved.txt\")",
      "skip": "fresh(\"paper/draft.md\")",
      "check": "size(\"paper/draft.md\") > 2000",
      "on": ["notes/**/*.md"]},
    "plain": {"title": "Plain", "instruction": "No conditions"}
  }},
  "stepQueue": ["research", "paper", "plain"],
  "currentStep": 0,
  "stepRuns": {},
  "status": "IN_PROGRESS"
}`
