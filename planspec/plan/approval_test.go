package plan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/planspec"
)

// TestPlan_Approval: a step's approve and a plan's approval reach the state in
// the words the plan wrote them, and read back the same.
func TestPlan_Approval(t *testing.T) {
	const src = `
name: gated
approval: required
steps:
  - {id: a, title: A, instruction: do a, approve: true}
  - {id: b, title: B, instruction: do b, approve: {timeout: 2h, onTimeout: approve}}
  - {id: c, title: C, instruction: do c, approve: false}
`
	p, err := ParsePlan(strings.NewReader(src), "plans/gated.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st := p.State("plans/gated.yaml", "h")
	data := st.Marshal()
	var top struct {
		Plan struct {
			Steps map[string]map[string]json.RawMessage `json:"steps"`
		} `json:"plan"`
		Stepseq map[string]json.RawMessage `json:"stepseq"`
	}
	if err := json.Unmarshal(data, &top); err != nil {
		t.Fatal(err)
	}
	compact := func(raw json.RawMessage) string {
		var b bytes.Buffer
		_ = json.Compact(&b, raw)
		return b.String()
	}
	for _, c := range []struct{ got, want string }{
		{compact(top.Stepseq["approval"]), `"required"`},
		{compact(top.Plan.Steps["a"]["approve"]), `true`},
		{compact(top.Plan.Steps["b"]["approve"]), `{"timeout":"2h","onTimeout":"approve"}`},
		{compact(top.Plan.Steps["c"]["approve"]), ``},
	} {
		if c.got != c.want {
			t.Errorf("got %s, want %s", c.got, c.want)
		}
	}
	back, err := planspec.ParseState(bytes.NewReader(data), "state.json")
	if err != nil {
		t.Fatal(err)
	}
	if back.Settings.Approval == nil || *back.Settings.Approval != (planspec.Approval{}) {
		t.Errorf("plan approval read back as %+v", back.Settings.Approval)
	}
	if b := back.Steps["b"].Approve; b == nil || !b.TimeoutApproves() || b.Timeout.String() != "2h" {
		t.Errorf("step b's approve read back as %+v", b)
	}
	if back.Steps["c"].Approve != nil {
		t.Errorf("approve: false read back as %+v", back.Steps["c"].Approve)
	}
}

// TestPlan_ApprovalErrors: a gate's setting that is not one says what it takes.
func TestPlan_ApprovalErrors(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"approval: yes\nsteps: [{id: a, title: A, instruction: x}]", `approval: want required, or {timeout: 2h, onTimeout: reject|approve}`},
		{"steps: [{id: a, title: A, instruction: x, approve: required}]", `approve: want true, or {timeout`},
		{"steps: [{id: a, title: A, instruction: x, approve: {timeout: 1h, onTimeout: maybe}}]", `onTimeout: want reject`},
		{"steps: [{id: a, title: A, instruction: x, approve: {onTimeout: approve}}]", `onTimeout without a timeout`},
		{"steps: [{id: a, title: A, instruction: x, approve: {timeuot: 1h}}]", `did you mean "timeout"`},
		{"steps: [{id: a, title: A, instruction: x, approval: required}]", `it is a plan key`},
	} {
		_, err := ParsePlan(strings.NewReader(c.src), "p.yaml")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant it to say %q", c.src, err, c.want)
		}
	}
}
