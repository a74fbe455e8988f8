package core

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stepseq/stepseq/planspec"
	planpkg "github.com/stepseq/stepseq/planspec/plan"
)

// Loops in the machine alone: the rig answers every launch with
// the worker's accepted and done reports and the agent's exit, as a driver
// would, and the probe's conditions are evaluated on the state.

// stateConds evaluates exit and abort on the state, as a workspace's would.
type stateConds struct{ st *planspec.State }

func (c stateConds) Cond(now time.Time, id, kind string) (bool, error) {
	if sp := c.st.Steps[id]; kind == planpkg.CondSkip && sp != nil && sp.Skip != "" {
		cond, err := planpkg.CompileCondition(sp.Skip)
		if err != nil {
			return false, err
		}
		return cond.Eval(&planpkg.Env{Now: now, Runs: c.st.StepRuns, Step: id, Loop: c.st.LoopAround(id)})
	}
	return StateCond(c.st, now, id, kind)
}
func (c stateConds) Check(time.Time, string) func() (bool, error) { return nil }
func (stateConds) Reads(string) ([]string, []string, bool)        { return nil, nil, false }

type loopProbe struct{ fakeProbe }

func (p *loopProbe) Conditions(st *planspec.State) (CondSet, error) { return stateConds{st}, nil }

// loopRig is a rig on a plan's fresh state, with the plan's params given.
func loopRig(t *testing.T, plan string, params map[string]any) *rig {
	t.Helper()
	p, err := planpkg.ParsePlan(strings.NewReader(plan), "plan.yaml")
	if err != nil {
		t.Fatal(err)
	}
	resolved, err := p.ResolveParams(params)
	if err != nil {
		t.Fatal(err)
	}
	st := p.State("plans/plan.yaml", "h")
	st.Settings.Params = resolved
	lp := &loopProbe{fakeProbe{missing: map[string]bool{}, mtimes: map[string]time.Time{}}}
	r := &rig{t: t, p: &lp.fakeProbe, now: t0}
	r.m = NewMachine(MachineConfig{Driver: "test", MaxRetries: 3, Persistent: true, Probe: lp})
	r.feed(StateRead{State: parse(t, string(st.Marshal()))})
	return r
}

// launch is one agent the machine started, with the round its step ran in.
type launch struct {
	step, prompt string
	round        int
}

// drive answers each launch with answer's result (nil: a done report without
// one) until the machine launches nothing more, and returns the launches.
func drive(t *testing.T, r *rig, answer func(step string, round int) any) []launch {
	t.Helper()
	var out []launch
	for range 100 {
		s, ok := started(r.take())
		if !ok {
			return out
		}
		round := 0
		if g, _ := r.m.State().GroupOf(s.Step); g != nil {
			round = r.m.State().Loop(g.ID).Round
		}
		out = append(out, launch{s.Step, s.Prompt, round})
		r.feed(ReportIn{Step: s.Step, Try: s.Try, Report: good(planspec.WorkerReport{Status: planspec.ReportAccepted}), Via: "test"})
		done := good(planspec.WorkerReport{Status: planspec.ReportDone})
		if res := answer(s.Step, round); res != nil {
			done.Result, _ = json.Marshal(res)
		}
		r.feed(ReportIn{Step: s.Step, Try: s.Try, Report: done, Via: "test"})
		r.now = r.now.Add(time.Second)
		r.feed(AgentExited{Step: s.Step, Try: s.Try, Exit: Exit{Code: 0, Started: r.now.Add(-time.Second), Ended: r.now}})
	}
	t.Fatal("the plan launched 100 agents: it does not end")
	return nil
}

func readExample(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../examples/plans/review-rounds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// reviewer answers as a review program does: findings[k] are what round k+1's
// review finds; the fixer fixes them all and changed code unless changed says
// otherwise for that round.
func reviewer(findings []int, changed []bool) func(string, int) any {
	return func(step string, round int) any {
		switch step {
		case "review":
			return map[string]any{"doc_path": fmt.Sprintf("review-%d.md", round), "findings_total": findings[round-1]}
		case "respond":
			return map[string]any{"fixed_count": findings[round-1], "code_changed": changed[round-1]}
		}
		return nil
	}
}

func stepsOf(ls []launch) string {
	var b []string
	for _, l := range ls {
		if l.round > 0 {
			b = append(b, fmt.Sprintf("%s@%d", l.step, l.round))
		} else {
			b = append(b, l.step)
		}
	}
	return strings.Join(b, " ")
}

// TestMachine_ReviewRounds drives the review-rounds example to the end of each
// of its three branches.
func TestMachine_ReviewRounds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		findings []int
		changed  []bool
		want     string // the steps launched, @round
		ended    string
		rounds   int
		fixed    float64
		blocked  string
	}{
		{name: "converged after 2 rounds", findings: []int{2, 0}, changed: []bool{true, true},
			want: "review@1 respond@1 resolve@1 review@2 publish", ended: planspec.LoopExit, rounds: 2, fixed: 2},
		{name: "nothing more to change", findings: []int{3}, changed: []bool{false},
			want: "review@1 respond@1 publish", ended: planspec.LoopExit, rounds: 1, fixed: 3},
		{name: "did not converge", findings: []int{4, 2, 1}, changed: []bool{true, true, true},
			want: "review@1 respond@1 resolve@1 review@2 respond@2 resolve@2 review@3 respond@3 resolve@3", ended: planspec.LoopMax,
			rounds: 3, fixed: 7, blocked: "rounds: did not converge in 3 rounds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := loopRig(t, readExample(t), map[string]any{"max_rounds": 3})
			ls := drive(t, r, reviewer(tc.findings, tc.changed))
			if got := stepsOf(ls); got != tc.want {
				t.Fatalf("launched %q\nwant     %q", got, tc.want)
			}
			for _, l := range ls {
				if l.step == "review" && !strings.HasPrefix(l.prompt, fmt.Sprintf("[Round %d/3] Review the code in .", l.round)) {
					t.Errorf("review's prompt in round %d: %q", l.round, l.prompt)
				}
				if l.step == "respond" && !strings.Contains(l.prompt, fmt.Sprintf("review-%d.md", l.round)) {
					t.Errorf("respond's prompt in round %d does not name that round's findings: %q", l.round, l.prompt)
				}
			}
			st := r.m.State()
			l := st.Loop("rounds")
			if l == nil || l.Ended != tc.ended || l.Round != tc.rounds || len(l.Rounds) != tc.rounds {
				t.Fatalf("loop %+v, want ended %s after %d rounds, each kept", l, tc.ended, tc.rounds)
			}
			sum := st.Settings.SummaryValues
			if sum["rounds"] != float64(tc.rounds) && sum["rounds"] != tc.rounds || sum["fixed"] != tc.fixed && sum["fixed"] != int(tc.fixed) {
				t.Errorf("summary %v, want %d rounds and %v fixed", sum, tc.rounds, tc.fixed)
			}
			if tc.blocked != "" {
				if !r.m.Blocked() || !strings.Contains(strings.Join(st.Blockers, "\n"), tc.blocked) {
					t.Fatalf("blocked %v with %q, want %q", r.m.Blocked(), st.Blockers, tc.blocked)
				}
				if st.Run("publish").Status != planspec.StatusPending {
					t.Errorf("publish ran after a loop that did not converge")
				}
				return
			}
			if !r.m.Done() {
				t.Fatalf("plan not done: %+v", r.m.Decision())
			}
			if l := ls[len(ls)-2]; l.step == "review" && !st.Run("respond").Skipped {
				t.Errorf("respond not skipped in the round the review converged")
			}
		})
	}
}

// TestMachine_LoopJournal: every round's start and every exit is journalled with
// its reason, and every notification about a step of the loop says where it stands.
func TestMachine_LoopJournal(t *testing.T) {
	r := loopRig(t, readExample(t), map[string]any{"max_rounds": 3})
	var effs []Effect
	answer := reviewer([]int{1, 0}, []bool{true, true})
	for range 20 {
		batch := r.take()
		effs = append(effs, batch...)
		s, ok := started(batch)
		if !ok {
			break
		}
		round := r.m.State().LoopAround(s.Step).Round
		r.feed(ReportIn{Step: s.Step, Try: s.Try, Report: good(planspec.WorkerReport{Status: planspec.ReportAccepted}), Via: "test"})
		done := good(planspec.WorkerReport{Status: planspec.ReportDone})
		if res := answer(s.Step, round); res != nil {
			done.Result, _ = json.Marshal(res)
		}
		r.feed(ReportIn{Step: s.Step, Try: s.Try, Report: done, Via: "test"})
		r.feed(AgentExited{Step: s.Step, Try: s.Try, Exit: Exit{Code: 0}})
	}
	rounds := journal(effs, LoopRound)
	if len(rounds) != 2 || rounds[0].Reason != "rounds: round 1/3 starts" || rounds[1].Reason != "rounds: round 2/3 starts" {
		t.Fatalf("round entries %+v", rounds)
	}
	exits := journal(effs, LoopLeft)
	if len(exits) != 1 || exits[0].Step != "review" || exits[0].Reason != "rounds: exit: result.findings_total == 0 held after review in round 2" {
		t.Fatalf("exit entries %+v", exits)
	}
	seen := 0
	for _, e := range effs {
		n, ok := e.(Notify)
		if !ok || n.Note.Step == "" {
			continue
		}
		if g, _ := r.m.State().GroupOf(n.Note.Step); g != nil {
			if !strings.Contains(n.Note.Output, "(round ") || !strings.Contains(n.Note.Output, ", step ") {
				t.Errorf("notification without progress: %+v", n.Note)
			}
			seen++
		}
	}
	if seen == 0 {
		t.Fatal("no notification about the loop's steps")
	}
	next := ""
	for _, e := range effs {
		if n, ok := e.(Notify); ok && n.Note.Step == "resolve" && n.Note.Status == planspec.PhaseDone {
			next = n.Note.Next
		}
	}
	if next != "round 2/3: step review" {
		t.Errorf("the verified end of round 1 says next %q", next)
	}
	if !strings.Contains(notesText(effs, "review", 2), "round 2/3, step 1/3") {
		t.Errorf("round 2's review launch said %q", notesText(effs, "review", 2))
	}
}

// notesText is the output of the dispatching notes of step, the n-th.
func notesText(effs []Effect, step string, n int) string {
	for _, e := range effs {
		if note, ok := e.(Notify); ok && note.Note.Step == step && note.Note.Status == planspec.PhaseDispatching {
			if n--; n == 0 {
				return note.Note.Output
			}
		}
	}
	return ""
}

const loopPlan = `
name: bound
steps:
  - id: loop
    repeat: {max: %d, onMax: %s}
    steps:
      - id: work
        title: Work
        instruction: Work, round ${round}.
%s
  - id: after
    title: After
    instruction: Go on.
`

// TestMachine_LoopRules: onMax done goes on, abort blocks with its reason, exit
// outside a loop ends the plan DONE, and a loop's rounds are bounded.
func TestMachine_LoopRules(t *testing.T) {
	t.Run("onMax done goes on", func(t *testing.T) {
		r := loopRig(t, fmt.Sprintf(loopPlan, 2, "done", ""), nil)
		if got := stepsOf(drive(t, r, func(string, int) any { return nil })); got != "work@1 work@2 after" {
			t.Fatalf("launched %q", got)
		}
		if !r.m.Done() || r.m.State().Loop("loop").Ended != planspec.LoopMax {
			t.Fatalf("done %v, loop %+v", r.m.Done(), r.m.State().Loop("loop"))
		}
	})
	t.Run("abort blocks with the reason", func(t *testing.T) {
		r := loopRig(t, fmt.Sprintf(loopPlan, 5, "block", "        abort: round == 2 && result.bad"), nil)
		got := stepsOf(drive(t, r, func(string, int) any { return map[string]any{"bad": true} }))
		if got != "work@1 work@2" {
			t.Fatalf("launched %q", got)
		}
		want := "work: aborted: abort: round == 2 && result.bad holds"
		if !r.m.Blocked() || r.m.Decision().Reason != want || !strings.Contains(strings.Join(r.m.State().Blockers, "|"), want) {
			t.Fatalf("blocked %v: %q, blockers %q", r.m.Blocked(), r.m.Decision().Reason, r.m.State().Blockers)
		}
	})
	t.Run("exit outside a loop ends the plan DONE", func(t *testing.T) {
		plan := `
steps:
  - id: first
    title: First
    instruction: Decide.
    exit: result.stop
  - id: second
    title: Second
    instruction: Never runs.
`
		r := loopRig(t, plan, nil)
		if got := stepsOf(drive(t, r, func(string, int) any { return map[string]any{"stop": true} })); got != "first" {
			t.Fatalf("launched %q", got)
		}
		st := r.m.State()
		if !r.m.Done() || st.Status != planspec.StatusDone || !st.Run("second").Skipped {
			t.Fatalf("done %v, status %s, second %+v", r.m.Done(), st.Status, st.Run("second"))
		}
	})
	t.Run("an exit that fails to evaluate blocks", func(t *testing.T) {
		r := loopRig(t, fmt.Sprintf(loopPlan, 5, "block", "        exit: result.count > 1"), nil)
		drive(t, r, func(string, int) any { return nil })
		if !r.m.Blocked() || !strings.HasPrefix(r.m.Decision().Reason, "work: exit: ") {
			t.Fatalf("blocked %v: %q", r.m.Blocked(), r.m.Decision().Reason)
		}
	})
	t.Run("a skipped step's exit is not asked", func(t *testing.T) {
		r := loopRig(t, fmt.Sprintf(loopPlan, 2, "done", "        skip: round == 1\n        exit: result.stop"), nil)
		if got := stepsOf(drive(t, r, func(string, int) any { return map[string]any{"stop": true} })); got != "work@2 after" {
			t.Fatalf("launched %q", got)
		}
		if l := r.m.State().Loop("loop"); !r.m.Done() || l.Ended != planspec.LoopExit || l.Round != 2 {
			t.Fatalf("done %v, loop %+v", r.m.Done(), l)
		}
	})
	t.Run("rounds are bounded and the state stays flat", func(t *testing.T) {
		r := loopRig(t, fmt.Sprintf(loopPlan, 200, "done", ""), nil)
		sizes := map[int]int{}
		for range 300 {
			s, ok := started(r.take())
			if !ok {
				break
			}
			if s.Step == "work" {
				sizes[r.m.State().Loop("loop").Round] = len(r.disk)
			}
			r.feed(AgentExited{Step: s.Step, Try: s.Try, Exit: Exit{Code: 0}})
		}
		l := r.m.State().Loop("loop")
		if l.Round != 200 || len(l.Rounds) != planspec.MaxRoundsKept || l.Dropped != 200-planspec.MaxRoundsKept {
			t.Fatalf("loop at round %d keeps %d rounds, dropped %d", l.Round, len(l.Rounds), l.Dropped)
		}
		// Past the bound, a round costs nothing more: only the digits of the
		// counts grow.
		if d := sizes[200] - sizes[20]; d < 0 || d > 16 {
			t.Fatalf("state.json is %d bytes at round 20 and %d at round 200", sizes[20], sizes[200])
		}
	})
}

// TestRerun_RestartsTheLoop: re-running from before a group starts its loop
// over at round 1.
func TestRerun_RestartsTheLoop(t *testing.T) {
	r := loopRig(t, fmt.Sprintf(loopPlan, 2, "done", ""), nil)
	drive(t, r, func(string, int) any { return nil })
	st := r.m.State()
	if err := Rerun(st, "work"); err != nil {
		t.Fatal(err)
	}
	if st.Loop("loop") != nil || st.CurrentStep != 0 {
		t.Fatalf("after a re-run: loop %+v, cursor %d", st.Loop("loop"), st.CurrentStep)
	}
}

// TestRetry_GrantsARound: stepseq retry on a loop that did not converge grants
// one more round, and the loop converges in it.
func TestRetry_GrantsARound(t *testing.T) {
	r := loopRig(t, readExample(t), map[string]any{"max_rounds": 2})
	findings := []int{3, 2, 0}
	answer := reviewer(findings, []bool{true, true, true})
	if got := stepsOf(drive(t, r, answer)); got != "review@1 respond@1 resolve@1 review@2 respond@2 resolve@2" || !r.m.Blocked() {
		t.Fatalf("launched %q, blocked %v", got, r.m.Blocked())
	}
	r.feed(TriggersIn{Triggers: []Trigger{{Step: "resolve", Retry: true, From: "test"}}})
	if got := stepsOf(drive(t, r, answer)); got != "review@3 publish" {
		t.Fatalf("after the retry: launched %q", got)
	}
	st := r.m.State()
	if l := st.Loop("rounds"); !r.m.Done() || l.Max != 3 || l.Ended != planspec.LoopExit || len(st.Blockers) != 0 {
		t.Fatalf("done %v, loop %+v, blockers %q", r.m.Done(), l, st.Blockers)
	}
}

// TestRerun_InAFinishedLoopCountsTheRoundOnce: re-running a step after the
// first of a loop that ended runs its last round again from there; the
// round's record and its totals are the new run's, not a second round beside
// the first.
func TestRerun_InAFinishedLoopCountsTheRoundOnce(t *testing.T) {
	r := loopRig(t, `
name: again
steps:
  - id: loop
    repeat: {max: 3, onMax: done}
    totals: {n: fix.result.n, seen: {list: fix.result.n}}
    steps:
      - {id: look, title: Look, instruction: look}
      - {id: fix, title: Fix, instruction: fix}
  - {id: after, title: After, instruction: go on}
`, nil)
	n := 0
	answer := func(step string, round int) any {
		if step != "fix" {
			return nil
		}
		n++
		return map[string]any{"n": n}
	}
	drive(t, r, answer)
	st := r.m.State()
	if err := Rerun(st, "fix"); err != nil {
		t.Fatal(err)
	}
	r.feed(StateRead{State: parse(t, string(st.Marshal()))})
	if got := stepsOf(drive(t, r, answer)); got != "fix@3 after" {
		t.Fatalf("after the re-run: launched %q", got)
	}
	st = r.m.State()
	l := st.Loop("loop")
	if !r.m.Done() || len(l.Rounds) != 3 || l.Round != 3 {
		t.Fatalf("done %v, round %d, %d rounds kept, want 3", r.m.Done(), l.Round, len(l.Rounds))
	}
	// Rounds 1 and 2 gave 1 and 2; round 3 gave 3, then 4 when re-run.
	if got := fmt.Sprint(st.Totals()); got != "map[n:7 seen:[1 2 4]]" {
		t.Errorf("totals %s, want round 3 counted once, as re-run", got)
	}
	if got := string(l.Rounds[2]["fix"].Result); got != `{"n":4}` {
		t.Errorf("round 3's record %s, want the re-run's", got)
	}
}
