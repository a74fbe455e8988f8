package plan

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/planspec"
)

// totalsPlan is a review loop with the totals given (the lines under
// totals:, indented by 6) and the plan's tail (summary, a step after).
func totalsPlan(max, totals, tail string) string {
	return `name: t
steps:
  - id: rounds
    title: Rounds
    repeat: {max: ` + max + `}
    totals:
` + totals + `
    steps:
      - id: review
        title: Review
        instruction: review
        result:
          type: object
          required: [findings_total]
          properties: {findings_total: {type: integer}, doc: {type: string}, tags: {type: array}}
      - id: fix-it
        title: Fix
        instruction: fix
        result: {type: object, properties: {fixed_count: {type: integer}}}
` + tail
}

// A group's totals decode into the state with their kinds, and conditions,
// templates and the summary read them as totals.NAME, typed by their kind.
func TestParsePlan_Totals(t *testing.T) {
	src := totalsPlan("200", `      fixed: '$env["fix-it"].result.fixed_count'
      found: {sum: review.result.findings_total}
      clean: {count: "review.result.findings_total == 0"}`, `  - id: publish
    title: Publish ${totals.clean} clean rounds
    instruction: publish ${totals.fixed} fixes
    when: totals.fixed > 0 && totals.clean % 2 == 0
summary:
  fixed: totals.fixed
  mean: totals.found / round
`)
	p, err := ParsePlan(strings.NewReader(src), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]planspec.Total{
		"fixed": {Sum: `$env["fix-it"].result.fixed_count`},
		"found": {Sum: "review.result.findings_total"},
		"clean": {Count: "review.result.findings_total == 0"},
	}
	st := p.State("plans/p.yaml", "h")
	if got := st.Group("rounds").Totals; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("totals %v, want %v", got, want)
	}
	back, err := planspec.ParseState(strings.NewReader(string(st.Marshal())), "state.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Group("rounds").Totals; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("totals through state.json %v, want %v", got, want)
	}
	if got := back.Totals(); fmt.Sprint(got) != "map[clean:0 fixed:0 found:0]" {
		t.Errorf("totals before the loop starts: %v", got)
	}
	list := totalsPlan("params.n", "      docs: {list: review.result.doc}", "params: {n: {type: integer, default: 3}}\nsummary: {docs: 'join(totals.docs, \",\")'}\n")
	if _, err := ParsePlan(strings.NewReader(list), "p.yaml"); err != nil {
		t.Errorf("a list total under a max given by a param: %v", err)
	}
}

// A bad total is a located validate error that says how to write it.
func TestParsePlan_TotalsErrors(t *testing.T) {
	for _, tc := range []struct{ name, max, totals, tail, want string }{
		{"an unknown step", "5", "      fixed: reviw.result.findings_total", "",
			`p.yaml:7:14: fixed: unknown name "reviw": did you mean "review"? A total reads the round's steps by id`},
		{"a step of another group", "5", "      fixed: publish.result.n", "  - {id: publish, title: P, instruction: p}\n",
			`p.yaml:7:14: fixed: unknown name "publish": a total reads the round's steps by id (fix-it, review)`},
		{"a string summed", "5", "      docs: review.result.doc", "",
			`p.yaml:7:13: docs: gives string, want a number to add up: count the rounds where it holds with {count: EXPR}`},
		{"a number counted", "5", "      n: {count: review.result.findings_total}", "",
			`p.yaml:7:18: n: gives int, want true or false: {count: EXPR} counts the rounds where it holds`},
		{"a list of lists", "5", "      tags: {list: review.result.tags}", "",
			`p.yaml:7:20: tags: gives []interface {}, want one plain value a round`},
		{"a field the schema closes", "5", "      n: review.reslt", "",
			`p.yaml:7:17: n: unknown field reslt`},
		{"an unknown kind", "5", "      n: {avg: review.result.findings_total}", "",
			`p.yaml:7:11: n: unknown kind "avg": want an expression over a round (its sum), or {count: EXPR} or {list: EXPR}`},
		{"two kinds", "5", "      n: {sum: a, count: b}", "",
			`p.yaml:7:10: n: want an expression over a round (its sum), or {count: EXPR} or {list: EXPR}`},
		{"a name totals.NAME cannot read", "5", "      fixed-count: review.result.findings_total", "",
			`p.yaml:7:7: total "fixed-count": want a name of letters, digits and "_"`},
		{"not a mapping", "5", "      - fixed", "",
			`p.yaml:7:7: totals: want a mapping of names to expressions over a round`},
		{"a list longer than it keeps", "200", "      docs: {list: review.result.doc}", "",
			`p.yaml:7:7: total "docs": a list keeps one value a round, at most 100, and this loop may run 200 rounds: count or sum them instead`},
		{"a name two groups give", "5", "      n: review.result.findings_total",
			"  - id: again\n    repeat: {max: 2}\n    totals: {n: {count: 'a.status == \"DONE\"'}}\n    steps: [{id: a, title: A, instruction: a}]\n",
			`p.yaml:22:14: total "n": group "rounds" declares it at line 7; a total's name is the plan's (totals.n): give this one another`},
		{"a total no group declares", "5", "      fixed: review.result.findings_total", "summary: {n: totals.fixd}\n",
			`p.yaml:20:14: n: no total "fixd": did you mean "fixed"?`},
		{"a total read as the wrong type", "5", "      fixed: review.result.findings_total", "summary: {n: 'totals.fixed + \"x\"'}\n",
			`p.yaml:20:28: n: invalid operation: + (mismatched types float64 and string)`},
		{"a count added to a string in an exit", "5", "      clean: {count: review.result.findings_total == 0}",
			"  - {id: after, title: A, instruction: a, exit: 'totals.clean + \"x\" == \"1x\"'}\n",
			`p.yaml:20:63: exit: invalid operation: + (mismatched types int and string)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePlan(strings.NewReader(totalsPlan(tc.max, tc.totals, tc.tail)), "p.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("errors:\n%v\nwant %q", err, tc.want)
			}
		})
	}
}

// totalsLoop is a state on the review loop with totals, and a function that
// finishes one round with the results given (nil: the step was skipped).
func totalsLoop(t *testing.T, totals string) (*planspec.State, func(review, fix any)) {
	t.Helper()
	p, err := ParsePlan(strings.NewReader(totalsPlan("params.n", totals, "params: {n: {type: integer, default: 1000}}\n")), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st := p.State("plans/p.yaml", "h")
	g := st.Group("rounds")
	l := &planspec.Loop{Round: 1, Max: 1000}
	st.Settings.Loops = map[string]*planspec.Loop{"rounds": l}
	return st, func(review, fix any) {
		for id, res := range map[string]any{"review": review, "fix-it": fix} {
			run := st.Run(id)
			run.Status, run.Skipped, run.Result = planspec.StatusDone, res == nil, nil
			if res != nil {
				run.Result, _ = json.Marshal(res)
			}
		}
		KeepTotals(g, l, st.KeepRound(g, l))
		l.Round++
	}
}

// Each finished round adds to the totals, over more rounds than rounds keeps:
// a skipped step adds nothing, a count counts, a list keeps one value a round.
func TestKeepTotals(t *testing.T) {
	st, round := totalsLoop(t, `      fixed: '$env["fix-it"].result.fixed_count'
      found: review.result.findings_total
      clean: {count: "review.result.findings_total == 0"}
      docs: {list: review.result.doc}`)
	for i := 1; i <= 25; i++ {
		var fix any
		if i%5 != 0 {
			fix = map[string]any{"fixed_count": i}
		}
		round(map[string]any{"findings_total": i % 3, "doc": fmt.Sprintf("r%d.md", i)}, fix)
	}
	got := st.Totals()
	// 1..25 without 5, 10, 15, 20, 25; findings 1,2,0 repeated; 8 rounds with none.
	if got["fixed"] != 250.0 || got["found"] != 25.0 || got["clean"] != 8 || len(got["docs"].([]any)) != 25 {
		t.Fatalf("totals %v", got)
	}
	if l := st.Loop("rounds"); len(l.Rounds) != planspec.MaxRoundsKept || l.Dropped != 15 {
		t.Fatalf("rounds kept %d, dropped %d", len(l.Rounds), l.Dropped)
	}
	sum := EvalSummary(map[string]string{"fixed": "totals.fixed", "kept": "sum(map(rounds, #[\"fix-it\"]?.result?.fixed_count ?? 0))"},
		&Env{Loop: st.Loop("rounds"), Totals: got})
	if sum["fixed"] != 250.0 || sum["kept"] == 250.0 {
		t.Errorf("summary %v: want the total exact, and rounds' sum not", sum)
	}
	back, err := planspec.ParseState(strings.NewReader(string(st.Marshal())), "state.json")
	if err != nil {
		t.Fatal(err)
	}
	if again := back.Totals(); fmt.Sprint(again) != fmt.Sprint(got) {
		t.Errorf("through state.json: %v, want %v", again, got)
	}
}

// A total that cannot add a round becomes the error that says which round and
// why, and stays so; the other totals go on.
func TestKeepTotals_Errors(t *testing.T) {
	st, round := totalsLoop(t, `      fixed: '$env["fix-it"].result.fixed_count'
      odd: '$env["fix-it"].result.other'
      docs: {list: review.result.doc}
      flag: {count: '$env["fix-it"].result.other'}`)
	round(map[string]any{"findings_total": 1, "doc": strings.Repeat("x", planspec.MaxTotalText+1)}, map[string]any{"fixed_count": 2, "other": "two"})
	round(map[string]any{"findings_total": 1, "doc": "ok"}, map[string]any{"fixed_count": 3, "other": 4})
	got := st.Totals()
	for name, want := range map[string]string{
		"odd":  `error: round 1: $env["fix-it"].result.other gave the string "two", want a number to add up`,
		"docs": "error: round 1: review.result.doc gave a string of 201 bytes: a list keeps values of at most 200",
		"flag": `error: round 1: $env["fix-it"].result.other gave the string "two", want true or false`,
	} {
		if s, _ := got[name].(string); !strings.HasPrefix(s, want) {
			t.Errorf("%s = %v, want %q", name, got[name], want)
		}
	}
	if got["fixed"] != 5.0 {
		t.Errorf("fixed = %v, want 5", got["fixed"])
	}

	st, round = totalsLoop(t, "      docs: {list: review.result.doc}")
	for i := range planspec.MaxTotalList + 1 {
		round(map[string]any{"findings_total": 0, "doc": fmt.Sprint(i)}, nil)
	}
	if s, _ := st.Totals()["docs"].(string); !strings.HasPrefix(s, "error: round 101: a list total keeps at most 100 values") {
		t.Errorf("a list past its bound: %v", st.Totals()["docs"])
	}
}
