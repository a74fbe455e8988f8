package plan

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-multierror"
	"github.com/stepseq/stepseq/planspec"
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
		back, err := planspec.ParseState(bytes.NewReader(out), "state.json")
		if err != nil {
			t.Fatalf("the state of a valid plan does not parse: %v\n%s", err, out)
		}
		if again := back.Marshal(); !bytes.Equal(again, out) {
			t.Fatalf("the state changes on a round trip:\n%s\n---\n%s", out, again)
		}
		if _, err := Compile(back); err != nil {
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
			if err := planspec.CheckPath(p); err != nil {
				t.Fatalf("accepted %q: %v", p, err)
			}
		}
		for _, g := range globs {
			if err := planspec.CheckGlob(g); err != nil {
				t.Fatalf("accepted %q: %v", g, err)
			}
		}
		if slices.Contains(paths, "") {
			t.Fatal("an empty path")
		}
	})
}

// FuzzCompileState: compiling the conditions of any state ParseState accepts
// never panics, eagerly or lazily.
func FuzzCompileState(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := planspec.ParseState(bytes.NewReader(data), "state.json")
		if err != nil {
			return
		}
		_, _ = Compile(st) // may fail, must not panic
		lazy, err := CompileLazily(st)
		if err != nil {
			return
		}
		for id := range st.Steps {
			for _, kind := range conditionKinds {
				_, _ = lazy.Get(id, kind)
			}
		}
	})
}
