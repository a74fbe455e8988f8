package planspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-multierror"
)

// The parsers recover from panics in yaml.v3 and expr so that the sidecar
// survives them; the fuzz targets look for those messages so that a panic
// still fails the fuzzer.
func isRecoveredPanic(err error) bool {
	s := err.Error()
	return strings.Contains(s, "cannot compile:") || strings.Contains(s, "invalid YAML: cannot parse:")
}

// FuzzParsePlan: ParsePlan never panics, reports only located PlanErrors, and a
// plan it accepts makes a state.json that parses, survives a round trip and
// compiles. Seeds: testdata/fuzz/FuzzParsePlan and the golden plans.
func FuzzParsePlan(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(plansDir, "*.yaml"))
	bad, _ := filepath.Glob(filepath.Join(plansDir, "bad", "*.yaml"))
	for _, file := range append(files, bad...) {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePlan(bytes.NewReader(data), "fuzz.yaml")
		if err != nil {
			if isRecoveredPanic(err) {
				t.Fatalf("panic: %v", err)
			}
			var me *multierror.Error
			if !errors.As(err, &me) || len(me.Errors) == 0 {
				t.Fatalf("want a *multierror.Error, got %T: %v", err, err)
			}
			for _, e := range me.Errors {
				var pe *PlanError
				if !errors.As(e, &pe) || pe.Line < 1 || pe.Col < 1 || pe.Msg == "" {
					t.Fatalf("want a located *PlanError, got %#v", e)
				}
			}
			return
		}
		if p.Name == "" || len(p.Steps) == 0 {
			t.Fatalf("accepted a plan without a name or steps: %+v", p)
		}
		st := p.State("plans/fuzz.yaml", Hash(data))
		out := st.Marshal()
		back, err := ParseState(bytes.NewReader(out), "state.json")
		if err != nil {
			t.Fatalf("the state of a valid plan does not parse: %v\n%s", err, out)
		}
		if again := back.Marshal(); !bytes.Equal(again, out) {
			t.Fatalf("the state changes on a round trip:\n%s\n---\n%s", out, again)
		}
		if _, err := back.Compile(); err != nil {
			t.Fatalf("the state of a valid plan does not compile: %v", err)
		}
		_ = p.Mermaid()
	})
}

// FuzzCompileCondition: CompileCondition never panics, and what it accepts
// names only paths inside the workspace.
func FuzzCompileCondition(f *testing.F) {
	f.Fuzz(func(t *testing.T, src string) {
		c, err := CompileCondition(src)
		if err != nil {
			var ce *ConditionError
			if !errors.As(err, &ce) || isRecoveredPanic(err) {
				t.Fatalf("%T: %v", err, err)
			}
			return
		}
		if c.Source() != src {
			t.Fatalf("Source() = %q, want %q", c.Source(), src)
		}
		paths, globs := c.Paths()
		for _, p := range paths {
			if err := checkPath(p); err != nil {
				t.Fatalf("accepted %q: %v", p, err)
			}
		}
		for _, g := range globs {
			if err := checkGlob(g); err != nil {
				t.Fatalf("accepted %q: %v", g, err)
			}
		}
		if slices.Contains(paths, "") {
			t.Fatal("an empty path")
		}
	})
}

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
		_, _ = back.Compile() // may fail, must not panic
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
