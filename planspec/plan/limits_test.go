package plan

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stepseq/stepseq/planspec"
)

// TestParsePlan_LimitKeys reads limitWait and resume at both levels, carries them
// into the state, and keeps them, with a run's session and limit, through a write
// and a read.
func TestParsePlan_LimitKeys(t *testing.T) {
	src := `limitWait: 2h
resume: true
steps:
  - id: a
    title: A
    instruction: do a
    limitWait: 30m
    resume: false
  - id: b
    title: B
    instruction: do b
`
	p, err := ParsePlan(strings.NewReader(src), "limits.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p.LimitWait != planspec.Duration(2*time.Hour) || !p.Resume {
		t.Fatalf("plan limitWait %v resume %v", p.LimitWait, p.Resume)
	}
	st := p.State("plans/limits.yaml", "h")
	a, b := st.Steps["a"], st.Steps["b"]
	if a.LimitWait != planspec.Duration(30*time.Minute) || a.Resume == nil || *a.Resume || b.Resume != nil {
		t.Fatalf("step a limitWait %v resume %v, b resume %v", a.LimitWait, a.Resume, b.Resume)
	}
	run := st.Run("a")
	run.Agent = &planspec.AgentRecord{StartedIso: "2026-01-01T00:00:00.000000+00:00",
		Session: planspec.AgentSession{Agent: "claude", ID: "0b6c"},
		Limit:   planspec.LimitHold{SinceIso: "2026-01-01T00:00:00.000000+00:00", UntilIso: "2026-01-01T05:00:00.000000+00:00", Stated: true, Waits: 1, Agent: "claude", Error: "You've hit your 5-hour limit"}}
	run.Phase = planspec.PhaseWaiting
	back, err := planspec.ParseState(bytes.NewReader(st.Marshal()), "state.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := back.StepRuns["a"]; got.Phase != planspec.PhaseWaiting || got.Agent.Session != run.Agent.Session || got.Agent.Limit != run.Agent.Limit {
		t.Fatalf("run a after a round trip: %+v %+v", got, got.Agent)
	}
	if back.Settings.LimitWait != p.LimitWait || !back.Settings.Resume || back.Steps["a"].Resume == nil || *back.Steps["a"].Resume {
		t.Fatalf("settings after a round trip: %+v, step a resume %v", back.Settings, back.Steps["a"].Resume)
	}
}

// TestParsePlan_LimitKeysBad names the file, line and what to write.
func TestParsePlan_LimitKeysBad(t *testing.T) {
	src := "resume: yes please\nlimitWait: soon\nsteps:\n  - {id: a, title: A, instruction: x, resume: 1}\n"
	_, err := ParsePlan(strings.NewReader(src), "bad.yaml")
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{"bad.yaml:1:9: resume: want true or false", "bad.yaml:2:12:", "limitWait", "bad.yaml:4:47: resume: want true or false, got the number 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors lack %q:\n%v", want, err)
		}
	}
}
