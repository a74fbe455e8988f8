package core

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/planspec"
)

// pulled is a state whose step b is pulled (agent: mcp) and step a runs a local
// agent; %d is the cursor, %s the runs, the last %s the plan's status.
const pulled = `{"plan":{"steps":{"a":{"title":"A","instruction":"do a"},
 "b":{"title":"B","instruction":"do b","agent":"mcp","requiredOutputs":["b.txt"],"result":{"type":"object"}}}},
 "stepQueue":["a","b"],"currentStep":%d,"stepRuns":{%s},"stepDelayMinutes":0,"blockers":[],"status":"%s","stepseq":{"name":"p"}}`

// TestOfferedTry: what a pulled step's try offers, from the state alone: the
// step at the cursor once dispatched, with the prompt it was launched with (the
// troubleshoot prompt after a failed try), and why nothing is offered otherwise.
func TestOfferedTry(t *testing.T) {
	cases := []struct {
		name, state string
		want        PulledTry
		why         string // "" when offered
	}{
		{"no plan", "", PulledTry{}, "no plan: submit one with plan_submit"},
		{"done", fmt.Sprintf(pulled, 2, `"a":{"status":"DONE","tries":1},"b":{"status":"DONE","tries":1}`, "DONE"), PulledTry{}, "the plan p is DONE: nothing to do"},
		{"a local step at the cursor", fmt.Sprintf(pulled, 0, ``, "IN_PROGRESS"), PulledTry{}, "step a runs a local agent (its agent is not mcp)"},
		{"not dispatched yet", fmt.Sprintf(pulled, 1, `"a":{"status":"DONE","tries":1}`, "IN_PROGRESS"), PulledTry{}, "step b is not started: nothing is offered now"},
		{"reported done", fmt.Sprintf(pulled, 1, `"a":{"status":"DONE","tries":1},"b":{"status":"IN_PROGRESS","tries":1,"phase":"reviewing"}`, "IN_PROGRESS"),
			PulledTry{}, "step b is IN_PROGRESS reviewing: nothing is offered now"},
		{"dispatched", fmt.Sprintf(pulled, 1, `"a":{"status":"DONE","tries":1},"b":{"status":"IN_PROGRESS","tries":1,"phase":"dispatching"}`, "IN_PROGRESS"),
			PulledTry{Step: "b", Try: 1, Prompt: "do b", RequiredOutputs: []string{"b.txt"}, Result: []byte(`{"type":"object"}`)}, ""},
		{"blocked by its worker", fmt.Sprintf(pulled, 1, `"a":{"status":"DONE","tries":1},"b":{"status":"IN_PROGRESS","tries":2,"phase":"blocked"}`, "IN_PROGRESS"),
			PulledTry{Step: "b", Try: 2, Prompt: "do b", RequiredOutputs: []string{"b.txt"}, Result: []byte(`{"type":"object"}`)}, ""},
		{"a retry after a failed try", fmt.Sprintf(pulled, 1, `"a":{"status":"DONE","tries":1},
			"b":{"status":"IN_PROGRESS","tries":2,"phase":"in_progress","stepseq":{"errors":[{"try":1,"error":"no b.txt"}]}}`, "IN_PROGRESS"),
			PulledTry{Step: "b", Try: 2, Prompt: "Step b failed (tries: 1). Previous run ended with: no b.txt. Please troubleshoot and retry: do b",
				RequiredOutputs: []string{"b.txt"}, Result: []byte(`{"type":"object"}`)}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var st *planspec.State
			if c.state != "" {
				st = parse(t, c.state)
			}
			got, ok, why := OfferedTry(st)
			if ok != (c.why == "") || why != c.why {
				t.Fatalf("ok %v why %q; want why %q", ok, why, c.why)
			}
			if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", c.want) || string(got.Result) != string(c.want.Result) {
				t.Errorf("offer %+v\nwant  %+v", got, c.want)
			}
		})
	}
}

// TestClaims_Take: a pulled try another worker took is refused while that
// worker's session lives, handed to the same worker again, and to another once
// the first one's session is gone.
func TestClaims_Take(t *testing.T) {
	c := Claims{}
	gone := map[string]bool{}
	live := func(client string) bool { return !gone[client] }
	if ok, _ := c.Take("b", 1, "w1", live); !ok {
		t.Fatal("the first claim refused")
	}
	if ok, why := c.Take("b", 1, "w2", live); ok || !strings.Contains(why, "taken by another worker (w1)") {
		t.Errorf("a second worker: ok %v why %q, want taken by w1", ok, why)
	}
	if ok, _ := c.Take("b", 1, "w1", live); !ok {
		t.Error("the same worker asking again refused")
	}
	if ok, _ := c.Take("b", 2, "w2", live); !ok {
		t.Error("another try refused")
	}
	gone["w1"] = true
	if ok, _ := c.Take("b", 1, "w2", live); !ok {
		t.Error("a claim whose session is gone still holds")
	}
	if ok, _ := c.Take("b", 1, "w1", nil); ok {
		t.Error("with no liveness, w2's claim does not hold")
	}
}
