package planspec

import (
	"encoding/json"
	"slices"
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

// TestScanObject: the scan reads every object as the decoder does, members,
// order, duplicates and the values' own bytes alike.
func TestScanObject(t *testing.T) {
	for _, in := range []string{
		`{}`, ` { } `, `{"a":1}`, "{\n  \"a\": 1,\n  \"b\": [1, {\"c\": \"}\"}],\n  \"d\": \"x\\\"y\"\n}",
		`{"k\u00e9y": true, "a\"b": null, "e": -1.5e3}`, `{"a": 1, "b": 2, "a": 3}`,
		`{"s": "{[\\]}", "n": {"m": [[], {}]}, "t": false}`, `{"ü": "ok"}`,
	} {
		got, ok := scanObject([]byte(in))
		want, err := decodeObject([]byte(in))
		if !ok || err != nil {
			t.Errorf("%s: scan ok %v, decode err %v", in, ok, err)
			continue
		}
		if !slices.Equal(got.keys, want.keys) {
			t.Errorf("%s: keys %q, want %q", in, got.keys, want.keys)
		}
		for k, v := range want.vals {
			if string(got.vals[k]) != string(v) {
				t.Errorf("%s: %q = %s, want %s", in, k, got.vals[k], v)
			}
		}
	}
	for _, in := range []string{`[]`, `"x"`, `1`, ``} {
		if _, ok := scanObject([]byte(in)); ok {
			t.Errorf("%q read as an object", in)
		}
	}
}
