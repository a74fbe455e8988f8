package planspec

import (
	"strings"
	"testing"
)

func TestLastJSON(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
	}{
		{"whole object", ` {"a": 1} `, `{"a": 1}`},
		{"a number", "42\n", "42"},
		{"json lines", "{\"n\":1}\nnot json\n{\"n\":2}\n", `{"n":2}`},
		{"pretty printed after words", "Here it is:\n{\n  \"a\": [1, 2]\n}\n", "{\n  \"a\": [1, 2]\n}"},
		{"on the last line after words", `Result: {"count": 3}`, `{"count": 3}`},
		{"fenced", "Done.\n```json\n{\"count\": 3}\n```\nThanks.", `{"count": 3}`},
		{"array", "[1, {\"b\": 2}]", `[1, {"b": 2}]`},
		{"none", "no json here", ""},
		{"cut short", `{"a": [1, 2`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := LastJSON(tc.text)
			if string(got) != tc.want || ok != (tc.want != "") {
				t.Errorf("LastJSON(%q) = %q, %v; want %q", tc.text, got, ok, tc.want)
			}
		})
	}
}

func TestParseResultFile(t *testing.T) {
	for _, tc := range []struct {
		name, data, want, err string
	}{
		{"json", `{ "a" : 1 }`, `{"a":1}`, ""},
		{"yaml", "a: 1\nb: [x, y]\n", `{"a":1,"b":["x","y"]}`, ""},
		{"empty", "  \n", "", "r is empty"},
		{"int keys", "1: a\n", "", "keys are not all strings"},
		{"neither", "a: [1\n", "", "neither JSON nor YAML"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseResultFile([]byte(tc.data), "r")
			if string(got) != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Errorf("= %s, %v; want %s, %q", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestCheckResultFrom(t *testing.T) {
	for s, bad := range map[string]bool{"output": false, "file:out/r.json": false, "file:../x": true, "stdout": true, "file:": true} {
		if err := CheckResultFrom(s); (err != nil) != bad {
			t.Errorf("CheckResultFrom(%q) = %v", s, err)
		}
	}
}

// A text of many lines that open a bracket and never close it costs a bounded
// number of scans, and finds nothing.
func BenchmarkLastJSON_Unclosed(b *testing.B) {
	text := strings.Repeat("[\n", 1<<18) + "}"
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, ok := LastJSON(text); ok {
			b.Fatal("found a value")
		}
	}
}
