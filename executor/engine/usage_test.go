package engine

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/executor/metrics"
)

// The tokens and the cost of the tries' usage journal entries are counters by
// kind; a try that named no cost adds none, and every kind is there from the
// start.
func TestMetrics_Usage(t *testing.T) {
	reg := metrics.NewRegistry()
	m := NewMetrics(reg, nil)
	var before bytes.Buffer
	if err := reg.WriteText(&before); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(before.String(), `stepseq_agent_tokens_total{kind="cache"} 0`) {
		t.Errorf("the kinds are not there from the start:\n%s", before.String())
	}
	m.usage(map[string]any{"inputTokens": int64(1200), "outputTokens": int64(80), "cacheTokens": int64(5300), "costUsd": 0.0089})
	m.usage(map[string]any{"inputTokens": int64(500), "outputTokens": int64(120), "cacheTokens": int64(2000)})
	var b bytes.Buffer
	if err := reg.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`stepseq_agent_tokens_total{kind="input"} 1700`,
		`stepseq_agent_tokens_total{kind="output"} 200`,
		`stepseq_agent_tokens_total{kind="cache"} 7300`,
		`stepseq_agent_cost_usd_total 0.0089`,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %s in:\n%s", want, b.String())
		}
	}
}
