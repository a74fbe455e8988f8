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
		`{"a\\": "b\\\"c\\", "\\\"": ["\\", "\"\\"]}`,
	} {
		got, ok := spans(nil).scanObject([]byte(in))
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
		if _, ok := spans(nil).scanObject([]byte(in)); ok {
			t.Errorf("%q read as an object", in)
		}
	}
}

// plainString reads every string the decoder does, or declines it.
func TestPlainString(t *testing.T) {
	for _, in := range []string{
		`""`, `"plain"`, `"q\"uote"`, `"back\\slash"`, `"\\"`, `"\\\""`, `"\\\\"`, `"\/ \b \f \n \r \t"`,
		`"size(\"out/a.md\") > 100"`, `"é ü 漢字 🚀"`, ` "spaced" `,
	} {
		got, ok := plainString([]byte(in))
		var want string
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		if !ok || got != want {
			t.Errorf("%s: %q, %v; want %q", in, got, ok, want)
		}
	}
	// The decoder's: \u escapes and bytes that are not UTF-8, and what is not a string.
	for _, in := range []string{`"\u00e9"`, `"a\ud83d\ude80"`, "\"bad \xff\"", `1`, `null`, `["x"]`, `"`, ``} {
		if got, ok := plainString([]byte(in)); ok {
			t.Errorf("%s: read as %q", in, got)
		}
	}
}

// strList reads every list of strings as the decoder does, and names the item
// that is not a string.
func TestStrList(t *testing.T) {
	for _, in := range []string{`[]`, ` [ ] `, `["a"]`, "[\n  \"a\",\n  \"b\\u00e9\",\n  null\n]", `["\\\"]", "x\\"]`} {
		d := &stateDecoder{}
		got := d.strList("k", []byte(in))
		var want []string
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) || got == nil || len(d.errs) > 0 {
			t.Errorf("%s: %q, %v; want %q", in, got, d.errs, want)
		}
	}
	for in, want := range map[string]string{
		`{}`:              `k: want a list of strings, got an object`,
		`"x"`:             `k: want a list of strings, got a string "x"`,
		`["a", 1, ["b"]]`: "k[1]: want a string, got the number 1\nk[2]: want a string, got a list",
	} {
		d := &stateDecoder{}
		d.strList("k", []byte(in))
		if d.errs.Error() != want {
			t.Errorf("%s: %v; want %s", in, d.errs, want)
		}
	}
	if d := (&stateDecoder{}); d.strList("k", []byte(`null`)) != nil || len(d.errs) > 0 {
		t.Errorf("null: not nil")
	}
}
