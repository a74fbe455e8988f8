package planspec

import (
	"encoding/json"
	"strings"
	"testing"
)

var jsonIndexCases = []string{
	``, ` `, `{}`, `[]`, ` {"a": 1} `, `{"a":1,}`, `[1,]`, `[1 2]`, `{"a" 1}`, `{1: 2}`, `{"`, `{"a`, `{"a":1}{}`,
	`"x"`, "\"\xff\"", `"\ud800"`, "\"a\x7f\"", "\"\t\"", `"\u00G0"`, `"\u00e"`, `"\x"`, `"abc`, `"\`,
	`0`, `-0`, `01`, `-`, `1.`, `1.5`, `.5`, `1e5`, `1E+5`, `1e`, `1e+`, `-1.25e-3`, `2.`, `1x`,
	`true`, `tru`, `truex`, `false`, `null`, `nul`, `NaN`, `Infinity`,
	strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth),
	strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1),
	`{"plan": {"steps": {"a": {"title": "a title long enough to be remembered", "requiredOutputs": ["x"]}}}, "q": [1, 2]}`,
}

// indexJSON accepts what json.Valid accepts, and its spans are where a plain scan
// finds each object or list ending.
func TestIndexJSON(t *testing.T) {
	for _, in := range jsonIndexCases {
		checkIndex(t, []byte(in))
	}
}

func FuzzIndexJSON(f *testing.F) {
	for _, in := range jsonIndexCases {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkIndex(t, data) })
}

func checkIndex(t *testing.T, data []byte) {
	t.Helper()
	sp, ok := indexJSON(data)
	if want := json.Valid(data); ok != want {
		t.Fatalf("%q: valid %v, want %v", Clip(string(data), 60), ok, want)
	}
	if !ok {
		return
	}
	for i := range data {
		n, ok := sp[&data[i]]
		if !ok {
			continue
		}
		if n < minSpan || spans(nil).valueEnd(data, i) != i+n {
			t.Fatalf("%q: span at %d is %d, want %d", Clip(string(data), 60), i, n, spans(nil).valueEnd(data, i)-i)
		}
	}
}
