package engine

import (
	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/planspec"
)

// exitDetail is the journal's record of an agent's exit: how it ended, and
// what it spent, or that its usage is unknown (or did not read).
func exitDetail(exit core.Exit, u *planspec.Usage, err error) map[string]any {
	d := map[string]any{"code": exit.Code, "timedOut": exit.TimedOut, "ms": exit.Ended.Sub(exit.Started).Milliseconds()}
	switch {
	case err != nil:
		d["usage"] = "unknown: " + err.Error()
	case u == nil:
		d["usage"] = "unknown"
	}
	return d
}

// usage counts a try's usage from its journal entry's detail.
func (m *Metrics) usage(detail map[string]any) {
	if m == nil {
		return
	}
	for kind, key := range map[string]string{"input": "inputTokens", "output": "outputTokens", "cache": "cacheTokens"} {
		if n, ok := detail[key].(int64); ok && n > 0 {
			m.tokens.WithLabelValues(kind).Add(float64(n))
		}
	}
	if c, ok := detail["costUsd"].(float64); ok && c > 0 {
		m.cost.Add(c)
	}
}
