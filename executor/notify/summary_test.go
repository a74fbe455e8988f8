package notify

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/executor/core"
)

// The plan's last report carries its summary: in the JSON, and to a command
// sink as STEPSEQ_NOTIFY_SUMMARY; one too long keeps its names, each value cut.
func TestReport_Summary(t *testing.T) {
	r := FromNote(core.Notification{Plan: "p", Status: "done", Event: core.EventPlanDone, Summary: map[string]any{"rounds": 2, "doc": "r.md"}}).capped()
	b, _ := json.Marshal(r)
	if !strings.Contains(string(b), `"summary":{"doc":"r.md","rounds":2}`) {
		t.Errorf("JSON %s", b)
	}
	if !slices.Contains(r.env(), `STEPSEQ_NOTIFY_SUMMARY={"doc":"r.md","rounds":2}`) {
		t.Errorf("env %q", r.env())
	}
	big := Notice{Summary: map[string]any{"log": strings.Repeat("x", MaxOutputBytes), "n": 1}}.capped()
	if s, _ := big.Summary["log"].(string); len(s) > MaxFieldBytes || big.Summary["n"] != "1" {
		t.Errorf("capped summary: %d bytes, n %v", len(s), big.Summary["n"])
	}
	if (Notice{}).capped().Summary != nil {
		t.Error("a report without a summary got one")
	}
}
