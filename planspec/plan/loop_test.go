package plan

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stepseq/stepseq/planspec"
)

// loopOf is a loop at round n, its n-1 finished rounds (at most MaxRoundsKept)
// each with a review and a respond record.
func loopOf(n int) *planspec.Loop {
	st := planspec.NewState()
	g := &planspec.Group{ID: "loop", Steps: []string{"review", "respond"}}
	l := &planspec.Loop{Round: n, Max: 1000}
	for i := 1; i < n; i++ {
		st.StepRuns = map[string]*planspec.StepRun{
			"review":  {Status: planspec.StatusDone, Tries: 1, Result: json.RawMessage(fmt.Sprintf(`{"doc_path":"r%d.md","findings_total":%d}`, i, i))},
			"respond": {Status: planspec.StatusDone, Tries: 1, Result: json.RawMessage(fmt.Sprintf(`{"fixed_count":%d}`, i))},
		}
		st.KeepRound(g, l)
	}
	return l
}

// TestTemplate_RoundAndRounds: templates and summaries read the loop's round
// and its finished rounds, each a map of step id → run record.
func TestTemplate_RoundAndRounds(t *testing.T) {
	env := &Env{Loop: loopOf(3), Params: map[string]any{"max": 5}}
	tpl, err := CompileTemplate("[Round ${round}/${params.max}] after ${len(rounds)} rounds, ${rounds[1].review.result.doc_path}")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tpl.Render(env); err != nil || got != "[Round 3/5] after 2 rounds, r2.md" {
		t.Fatalf("rendered %q, %v", got, err)
	}
	sum := EvalSummary(map[string]string{"rounds": "round", "fixed": "sum(map(rounds, #.respond?.result?.fixed_count ?? 0))"}, env)
	if fmt.Sprint(sum["rounds"]) != "3" || fmt.Sprint(sum["fixed"]) != "3" {
		t.Fatalf("summary %v", sum)
	}
	c, err := CompileCondition("result.findings_total == 0 && step.tries == 1")
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]*planspec.StepRun{"review": {Status: planspec.StatusDone, Tries: 1, Result: json.RawMessage(`{"findings_total":0}`)}}
	if ok, err := c.Eval(&Env{Runs: runs, Step: "review"}); !ok || err != nil {
		t.Fatalf("exit on the step's own result: %v, %v", ok, err)
	}
}

// TestCondition_StepsNamed: an expression that names its steps reads only
// their records, and one that reaches steps otherwise reads them all.
func TestCondition_StepsNamed(t *testing.T) {
	runs := map[string]*planspec.StepRun{"a": {Status: planspec.StatusDone}, "b": {Status: planspec.StatusFailed}}
	for _, tc := range []struct {
		src  string
		want bool
	}{
		{`steps.a.status == "DONE" && steps["b"].status == "FAILED"`, true},
		{`len(steps) == 2`, true},
		{`all(["a", "b"], {steps[#].status != ""})`, true},
		{`steps.c.status == ""`, true},
	} {
		c, err := CompileCondition(tc.src)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := c.Eval(&Env{Runs: runs}); got != tc.want || err != nil {
			t.Errorf("%s = %v, %v; want %v", tc.src, got, err, tc.want)
		}
	}
}

// BenchmarkRenderTemplate_Loop: one template of a loop's step, reading round,
// rounds and params, at round 12 (10 rounds kept).
func BenchmarkRenderTemplate_Loop(b *testing.B) {
	tpl, err := CompileTemplate("[Round ${round}/${params.max}] Review ${params.target}; the last round found ${rounds[len(rounds)-1].review.result.findings_total}.")
	if err != nil {
		b.Fatal(err)
	}
	env := &Env{Loop: loopOf(12), Params: map[string]any{"max": 20, "target": "src/"}}
	b.ReportAllocs()
	var out string
	cpu := cpuNow()
	for b.Loop() {
		if out, err = tpl.Render(env); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuNow()-cpu).Nanoseconds())/float64(b.N)/1e3, "cpu-µs/render")
	if !strings.HasPrefix(out, "[Round 12/20] Review src/; the last round found 11.") {
		b.Fatalf("rendered %q", out)
	}
}

// cpuNow is the CPU time the process has used: on a loaded machine a
// benchmark's wall time is mostly its wait for a CPU.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
