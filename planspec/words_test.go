package planspec

import (
	"strings"
	"testing"
)

// TestParseState_Words: a state's field that takes one of a few words says, as
// a plan's does, which words with what each does, the value given, and the word
// it is close to; an absent, null or empty one is not set.
func TestParseState_Words(t *testing.T) {
	const plan = `"plan": {"steps": {"a": {"title": "A", "instruction": "x"%s}}}, "stepQueue": ["a"]`
	for _, tc := range []struct{ name, step, top, want string }{
		{"reports", `, "reports": "Optional"`, "",
			`state.json: plan.steps.a.reports: want required (the worker must report; without a done report the try fails) or optional (reports are honoured when they come), got "Optional": did you mean "optional"?`},
		{"onInvalid", `, "onInvalid": "later"`, "",
			`state.json: plan.steps.a.onInvalid: want retry (the try stays open for a corrected report) or abort (the try fails), got "later"`},
		{"settings' reports", "", `, "stepseq": {"reports": "always"}`,
			`state.json: stepseq.reports: want required (the worker must report; without a done report the try fails) or optional (reports are honoured when they come), got "always"`},
		{"status", "", `, "stepRuns": {"a": {"status": "done"}}`,
			`state.json: stepRuns.a.status: want PENDING, IN_PROGRESS, DONE or FAILED, got "done": did you mean "DONE"?`},
		{"empty status", "", `, "stepRuns": {"a": {"status": ""}}`,
			`state.json: stepRuns.a.status: want PENDING, IN_PROGRESS, DONE or FAILED, got ""`},
		{"phase", "", `, "stepRuns": {"a": {"phase": "in-progress"}}`,
			`state.json: stepRuns.a.phase: want planned, dispatching, in_progress, blocked, reviewing, done, waiting or awaiting_approval, got "in-progress": did you mean "in_progress"?`},
		{"onMax", "", `, "stepseq": {"groups": [{"id": "g", "max": "2", "onMax": "stop", "steps": ["a"]}]}`,
			`state.json: stepseq.groups[0].onMax: want block (the plan is blocked: did not converge) or done (the plan goes on), got "stop"`},
		{"unset", `, "reports": "", "onInvalid": null`, `, "stepRuns": {"a": {"phase": ""}}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := ParseState(strings.NewReader("{"+strings.Replace(plan, "%s", tc.step, 1)+tc.top+"}"), "state.json")
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("err = %s\nwant %s", got, tc.want)
			}
			if err == nil && (st.Steps["a"].Reports != "" || st.Steps["a"].OnInvalid != "") {
				t.Errorf("unset words read as %q, %q", st.Steps["a"].Reports, st.Steps["a"].OnInvalid)
			}
		})
	}
}

// TestCheckWord: one of the words is nil; any other names them all, in the
// order given, with what each does where that is said.
func TestCheckWord(t *testing.T) {
	words := []Word{{"a", "first"}, {"b", ""}, {"c", "third"}}
	for _, w := range []string{"a", "b", "c"} {
		if err := CheckWord(w, words); err != nil {
			t.Errorf("%s: %v", w, err)
		}
	}
	for in, want := range map[string]string{
		"B":                     `want a (first), b or c (third), got "B": did you mean "b"?`,
		strings.Repeat("x", 50): `want a (first), b or c (third), got "` + strings.Repeat("x", 40) + `…"`,
	} {
		if err := CheckWord(in, words); err == nil || err.Error() != want {
			t.Errorf("%.10s: %v, want %s", in, err, want)
		}
	}
}
