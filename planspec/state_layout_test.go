package planspec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

var layoutSamples = []string{
	`{}`, `[]`, `"x"`, `12.5e3`, `null`, `true`,
	`{"a":1,"b":[1,2,{"c":"d"}],"e":{},"f":[],"g":{"h":{"i":[[]]}}}`,
	` { "a" : [ 1 , 2 ] ,"b":{ } , "c" : [ ] }`,
	`{"q\"uote\\":"x\\\"y\"{[,:]}","u":"\u2028\ud83d\ude00","n":-0.5}`,
	"{\n  \"already\": {\n    \"indented\": [\n      1\n    ]\n  }\n}",
}

// appendIndented with nothing flat writes what json.Indent writes, at any depth.
func TestAppendIndented_Indent(t *testing.T) {
	for _, raw := range layoutSamples {
		for depth := range 3 {
			var want bytes.Buffer
			if err := json.Indent(&want, []byte(raw), strings.Repeat("  ", depth), "  "); err != nil {
				t.Fatal(err)
			}
			if got := appendIndented(nil, []byte(raw), depth, maxDepth); !bytes.Equal(got, want.Bytes()) {
				t.Errorf("%s at depth %d:\n%s\nwant\n%s", raw, depth, got, want.Bytes())
			}
		}
	}
}

// What is flat is written compact, on its line; the value is the same.
func TestAppendIndented_Flat(t *testing.T) {
	for _, raw := range layoutSamples {
		for flat := range 4 {
			got := appendIndented(nil, []byte(raw), 1, flat)
			var a, b bytes.Buffer
			if err := json.Compact(&a, got); err != nil {
				t.Fatalf("%s, flat %d: not JSON: %v\n%s", raw, flat, err, got)
			}
			_ = json.Compact(&b, []byte(raw))
			if a.String() != b.String() {
				t.Errorf("%s, flat %d: %s", raw, flat, got)
			}
		}
		if got, want := appendIndented(nil, []byte(raw), 1, 0), compactJSON([]byte(raw)); !bytes.Equal(got, want) {
			t.Errorf("%s, flat 0: %s, want %s", raw, got, want)
		}
	}
	raw := `{"steps":{"a":{"title":"A","requiredOutputs":["x"]},"b":{"title":"B"}},"other":[1]}`
	want := `{
    "steps": {
      "a": {"title":"A","requiredOutputs":["x"]},
      "b": {"title":"B"}
    },
    "other": [
      1
    ]
  }`
	if got := appendIndented(nil, []byte(raw), 1, 2); string(got) != want {
		t.Errorf("the plan, flat at its steps:\n%s\nwant\n%s", got, want)
	}
}

// From linesFrom steps on, a state is written one record a line: each step of
// the plan and each run on its own line, the file as valid as before and read
// back the same, whether the state was parsed, built or tracked, and when a
// plan grows across the threshold.
func TestState_OneRecordALine(t *testing.T) {
	defer func(n int) { linesFrom = n }(linesFrom)
	linesFrom = 4
	st := NewState()
	add := func(i int) {
		id := fmt.Sprintf("s%d", i)
		st.Steps[id] = &StepSpec{Title: "Step " + id, Instruction: "do \"it\"\n", RequiredOutputs: []string{"o/" + id}}
		st.StepQueue = append(st.StepQueue, id)
		st.TouchAll()
	}
	for i := range 3 {
		add(i)
	}
	st.Track()
	small := st.Marshal()
	if !bytes.Contains(small, []byte("\n        \"title\": \"Step s0\",\n")) {
		t.Fatalf("under linesFrom steps, not indented:\n%s", small)
	}
	for i := 3; i < 6; i++ {
		add(i)
		r := st.Run(fmt.Sprintf("s%d", i-3))
		r.Status, r.Tries, r.LastRunIso = StatusDone, 1, "2026-02-10T21:30:31.123456+00:00"
		r.Agent = &AgentRecord{StartedIso: r.LastRunIso, FinishedIso: r.LastRunIso}
		st.CurrentStep++
		out := st.Marshal()
		lines := strings.Split(string(out), "\n")
		want := len(st.Steps) + len(st.StepRuns) + len(st.StepQueue) + len(st.Artifacts)
		if len(st.Steps) < linesFrom {
			continue
		}
		if len(lines) > want+20 {
			t.Errorf("%d steps, %d runs: %d lines, want about %d:\n%s", len(st.Steps), len(st.StepRuns), len(lines), want, out)
		}
		if !bytes.Contains(out, []byte("\n      \"s0\": {\"title\":\"Step s0\",\"instruction\":\"do \\\"it\\\"\\n\",\"requiredOutputs\":[\"o/s0\"]}")) ||
			!bytes.Contains(out, []byte("\n    \"s0\": {\"status\":\"DONE\",\"tries\":1,")) {
			t.Errorf("a step or a run not on its line:\n%s", out)
		}
		back, err := ParseStateBytes(out, "state.json")
		if err != nil {
			t.Fatal(err)
		}
		if again := back.Marshal(); !bytes.Equal(again, out) {
			t.Fatalf("not stable on a round trip:\n%s\n---\n%s", out, again)
		}
		if fresh := st.Clone().Marshal(); !bytes.Equal(fresh, out) {
			t.Fatalf("tracked and full encodings differ:\n%s\n---\n%s", out, fresh)
		}
	}
	// An indented file of a large plan, once parsed, is written one record a line.
	indented := indentAt(compactJSON(st.Marshal()), 0)
	back, err := ParseStateBytes(indented, "state.json")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := back.Marshal(), st.Marshal(); !bytes.Equal(got, want) {
		t.Fatalf("parsed from an indented file:\n%s\nwant\n%s", got, want)
	}
}

// A finished run's record leaves out when its try finished when lastRunIso says
// it, and reads back the same; any other finish time is written.
func TestStepRun_FinishedIsoImplied(t *testing.T) {
	const t1, t2 = "2026-02-10T21:30:31.123456+00:00", "2026-02-10T21:31:00.000000+00:00"
	for _, c := range []struct {
		status, last, finished string
		written                bool
	}{
		{StatusDone, t2, t2, false},
		{StatusFailed, t2, t2, false},
		{StatusDone, t2, t1, true},
		{StatusInProgress, t2, t2, true},
		{StatusPending, t2, t2, true},
		{StatusInProgress, t2, "", false},
	} {
		st := NewState()
		st.Steps["a"] = &StepSpec{Title: "A", Instruction: "do"}
		st.StepQueue = []string{"a"}
		r := st.Run("a")
		r.Status, r.Tries, r.LastRunIso = c.status, 1, c.last
		r.Agent = &AgentRecord{StartedIso: t1, FinishedIso: c.finished}
		out := st.Marshal()
		if got := bytes.Contains(out, []byte(`"finishedIso"`)); got != c.written {
			t.Errorf("%+v: finishedIso written %v, want %v:\n%s", c, got, c.written, out)
		}
		back, err := ParseStateBytes(out, "state.json")
		if err != nil {
			t.Fatal(err)
		}
		if got := back.StepRuns["a"].Agent.FinishedIso; got != c.finished {
			t.Errorf("%+v: read back as finished %q", c, got)
		}
	}
}
