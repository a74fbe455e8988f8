package planspec

import (
	"encoding/json"
	"testing"
)

func TestAppendStrings_MatchesEncodingJSON(t *testing.T) {
	lists := [][]string{
		nil,
		{},
		{"plain", "with \"quotes\" and \\ slash", "tab\tnew\nline\rcr", "<html> & co", "ctl\x01\x1f", "é ü 漢字 🚀", "bad \xff utf8", "sep \u2028 \u2029"},
	}
	for _, list := range lists {
		got := string(appendStrings(nil, list))
		want, err := marshal(nonNil(list))
		if err != nil {
			t.Fatal(err)
		}
		if got != string(want) {
			t.Errorf("appendStrings(%q) =\n%s\nwant\n%s", list, got, want)
		}
		var back []string
		if err := json.Unmarshal([]byte(got), &back); err != nil {
			t.Errorf("not JSON: %v", err)
		}
	}
}
