package planspec

import (
	"strings"
	"testing"
)

// TestParseReport_NotUTF8: a report that is not UTF-8 is refused for that, naming
// the byte, where a plain block used to take the bytes in and UTF-16 read as an
// unreadable block.
func TestParseReport_NotUTF8(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"status: accepted\nsummary: s\xff\xfe\nevidence: e\nrisk: none\nnext: none\n", "r.yaml: not UTF-8 text (a bad byte 0xff at offset 27): write the report as UTF-8"},
		{"\xff\xfes\x00t\x00", "not UTF-8 text (a bad byte 0xff at offset 0)"},
	} {
		_, err := ParseReport(strings.NewReader(tc.in), "r.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.in, err, tc.want)
		}
	}
	rep := WorkerReport{Status: "accepted", Summary: "x\xffy", Evidence: "e", Risk: "none", Next: "n"}
	if p := rep.Problems(); len(p) != 1 || p[0] != "summary: not UTF-8 text: write it as UTF-8" {
		t.Errorf("problems: %q", p)
	}
}

// TestReport_ProblemsCap: a report given through any channel (MCP, the command
// line) is held to the cap a report file has, with that reason.
func TestReport_ProblemsCap(t *testing.T) {
	rep := WorkerReport{Status: "accepted", Summary: strings.Repeat("a", 1<<20), Evidence: "e", Risk: "none", Next: "n"}
	if p := rep.Problems(); len(p) != 1 || !strings.Contains(p[0], "1024 KiB is over the 64 KiB cap for a report") {
		t.Errorf("problems: %.200q", p)
	}
	rep.Summary = strings.Repeat("a", 60<<10)
	if p := rep.Problems(); len(p) != 0 {
		t.Errorf("a report under the cap: %.200q", p)
	}
}

// TestReport_ProblemsStatus: a status that is none of the words is told them,
// and the one it is close to; the completions offer the same words.
func TestReport_ProblemsStatus(t *testing.T) {
	rep := WorkerReport{Status: "Done", Summary: "s", Evidence: "e", Risk: "none", Next: "none"}
	want := `status: want accepted, milestone, blocked or done, got "Done": did you mean "done"?`
	if p := rep.Problems(); len(p) != 1 || p[0] != want {
		t.Errorf("problems %q, want %q", p, want)
	}
	for _, s := range ReportStatuses() {
		if rep.Status = s; len(rep.Problems()) != 0 {
			t.Errorf("status %s refused: %q", s, rep.Problems())
		}
	}
}
