package planspec

import (
	"fmt"
	"strings"
	"testing"
)

const totalsState = `{"plan": {"steps": {"a": {"title": "A", "instruction": "x"}, "b": {"title": "B", "instruction": "y"}}},
 "stepQueue": ["a", "b"], "stepseq": {%s}}`

// A group's totals and its loop's running totals go through state.json as
// they are, a key of a loop stepseq does not know is no error, and a count
// reads as a whole number.
func TestParseState_Totals(t *testing.T) {
	src := fmt.Sprintf(totalsState, `"groups": [{"id": "g", "max": "200", "steps": ["a"],
	  "totals": {"fixed": {"sum": "a.result.n"}, "clean": {"count": "a.result.n == 0"}, "docs": {"list": "a.result.doc"}}}],
	 "loops": {"g": {"round": 13, "max": 200, "roundsDropped": 2, "later": true,
	  "totals": {"fixed": 78, "clean": 3, "docs": ["r1.md", "r2.md"]}}}`)
	st, err := ParseState(strings.NewReader(src), "state.json")
	if err != nil {
		t.Fatal(err)
	}
	want := "map[clean:3 docs:[r1.md r2.md] fixed:78]"
	if got := fmt.Sprint(st.Totals()); got != want {
		t.Fatalf("totals %s, want %s", got, want)
	}
	if _, ok := st.Totals()["clean"].(int); !ok {
		t.Errorf("a count reads as %T, want int", st.Totals()["clean"])
	}
	back, err := ParseState(strings.NewReader(string(st.Marshal())), "state.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(back.Totals()); got != want || fmt.Sprint(back.Group("g").Totals) != fmt.Sprint(st.Group("g").Totals) {
		t.Errorf("through state.json: %s, groups %v", got, back.Group("g").Totals)
	}
	c := st.Clone()
	c.Loop("g").Totals["docs"] = append(c.Loop("g").Totals["docs"].([]any), "r3.md")
	c.Group("g").Totals["more"] = Total{Sum: "1"}
	if fmt.Sprint(st.Totals()) != want || len(st.Group("g").Totals) != 3 {
		t.Errorf("a clone's totals are the original's: %v", st.Totals())
	}
}

// A total the machine could not keep is refused, at its key.
func TestParseState_BadTotals(t *testing.T) {
	for _, tc := range []struct{ name, groups, want string }{
		{"no kind", `[{"id": "g", "max": "2", "steps": ["a"], "totals": {"n": {}}}]`,
			`stepseq.groups[0].totals.n: want one of sum, count or list`},
		{"two kinds", `[{"id": "g", "max": "2", "steps": ["a"], "totals": {"n": {"sum": "x", "list": "y"}}}]`,
			`stepseq.groups[0].totals.n: want one of sum, count or list`},
		{"a bad name", `[{"id": "g", "max": "2", "steps": ["a"], "totals": {"a-b": {"sum": "x"}}}]`,
			`stepseq.groups[0].totals.a-b: total "a-b": want a name of letters`},
		{"a name twice", `[{"id": "g", "max": "2", "steps": ["a"], "totals": {"n": {"sum": "x"}}},
			{"id": "h", "max": "2", "steps": ["b"], "totals": {"n": {"count": "y"}}}]`,
			`stepseq.groups[1].totals.n: total "n" is group "g"'s already`},
		{"an unknown kind", `[{"id": "g", "max": "2", "steps": ["a"], "totals": {"n": {"avg": "x"}}}]`,
			`stepseq.groups: want a list of groups, each {id, title, max, onMax, steps, totals}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseState(strings.NewReader(fmt.Sprintf(totalsState, `"groups": `+tc.groups)), "state.json")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v\nwant %s", err, tc.want)
			}
		})
	}
}
