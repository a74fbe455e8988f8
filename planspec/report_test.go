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
	rep := Report{Status: "accepted", Summary: "x\xffy", Evidence: "e", Risk: "none", Next: "n"}
	if p := rep.Problems(); len(p) != 1 || p[0] != "summary: not UTF-8 text: write it as UTF-8" {
		t.Errorf("problems: %q", p)
	}
}
