package engine

import (
	"strings"
	"testing"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/proc"
)

// BenchmarkOutputResult_Claude1MB reads the result of a step whose claude
// answered with a 1 MB final message: prose, then the result in a fenced block.
func BenchmarkOutputResult_Claude1MB(b *testing.B) {
	prose := strings.Repeat("The review found nothing new in this section of the paper.\n", (1<<20)/60)
	stdout := `{"type":"system","subtype":"init","session_id":"s1"}` + "\n" +
		claudeJSON(false, prose+"```json\n{\"findings_total\": 0, \"doc_path\": \"review.md\"}\n```\n")
	a := proc.Agent{Preset: "claude"}
	exit := core.Exit{StdoutTail: stdout}
	b.SetBytes(int64(len(stdout)))
	b.ReportAllocs()
	for b.Loop() {
		raw, err := a.OutputResult(exit)
		if err != nil || string(raw) != `{"findings_total":0,"doc_path":"review.md"}` {
			b.Fatalf("%s, %v", raw, err)
		}
	}
}
