package notify

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/planspec"
)

// Every report carries the run's spend so far, as its JSON says it.
func TestFromNote_Spend(t *testing.T) {
	r := FromNote(core.Notification{Plan: "p", Status: "done", Spend: &planspec.Spend{Tries: 2, InputTokens: 100, CostUSD: 0.5}})
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"spend":{"tries":2,"inputTokens":100,"costUsd":0.5}`) {
		t.Errorf("report %s", b)
	}
	if b, _ := json.Marshal(FromNote(core.Notification{Plan: "p"})); strings.Contains(string(b), "spend") {
		t.Errorf("a report before any try names a spend: %s", b)
	}
}
