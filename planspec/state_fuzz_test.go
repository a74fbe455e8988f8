package planspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"testing"
)

// FuzzParseState: ParseState never panics, and a state it accepts is written
// back in a form that reads the same.
func FuzzParseState(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ParseState(bytes.NewReader(data), "state.json")
		if err != nil {
			if !errors.Is(err, ErrInvalidState) {
				t.Fatalf("an error that is not ErrInvalidState: %v", err)
			}
			return
		}
		out := st.Marshal()
		back, err := ParseState(bytes.NewReader(out), "state.json")
		if err != nil {
			t.Fatalf("Marshal wrote what ParseState refuses: %v\n%s", err, out)
		}
		if again := back.Marshal(); !bytes.Equal(again, out) {
			t.Fatalf("not stable on a round trip:\n%s\n---\n%s", out, again)
		}
		// Written one record a line, as a large plan is, it is the same state.
		defer func(n int) { linesFrom = n }(linesFrom)
		linesFrom = 0
		lines := back.Marshal()
		inLines, err := ParseState(bytes.NewReader(lines), "state.json")
		if err != nil {
			t.Fatalf("Marshal one record a line wrote what ParseState refuses: %v\n%s", err, lines)
		}
		if again := inLines.Marshal(); !bytes.Equal(again, lines) {
			t.Fatalf("one record a line, not stable on a round trip:\n%s\n---\n%s", lines, again)
		}
		if !bytes.Equal(compactJSON(lines), compactJSON(out)) {
			t.Fatalf("one record a line, another state:\n%s\n---\n%s", out, lines)
		}
	})
}

// FuzzScan: on valid JSON, the plain scans read objects, lists of strings and
// strings as the decoder does, or decline them.
func FuzzScan(f *testing.F) {
	for _, seed := range []string{`{"a": [1, "x\"y"], "b\\": {"c": "\\"}}`, `["\\\"", "\u00e9", {"k": []}]`, `"q\"\\\/"`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		if want, err := decodeObject(data); err == nil {
			got, ok := spans(nil).scanObject(data)
			if !ok || !slices.Equal(got.keys, want.keys) || len(got.vals) != len(want.vals) {
				t.Fatalf("scanObject: %q, %v; want %q", got.keys, ok, want.keys)
			}
			for k, v := range want.vals {
				if !bytes.Equal(got.vals[k], v) {
					t.Fatalf("scanObject: %q = %s, want %s", k, got.vals[k], v)
				}
			}
		}
		var items []string
		if json.Unmarshal(data, &items) == nil && items != nil {
			d := &stateDecoder{}
			if got := d.strList("k", data); !slices.Equal(got, items) || len(d.errs) > 0 {
				t.Fatalf("strList: %q, %v; want %q", got, d.errs, items)
			}
		}
		var s string
		if json.Unmarshal(data, &s) == nil {
			if got, ok := plainString(data); ok && got != s {
				t.Fatalf("plainString: %q, want %q", got, s)
			}
		}
	})
}
