package plan

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stepseq/stepseq/planspec"
)

// A state.json written by hand, with stepseq's keys in plan.steps.
const handWrittenState = `{
  "plan": {"steps": {
    "research": {"title": "Research", "instruction": "Write study/summary.md", "requiredOutputs": ["study/summary.md"]},
    "paper": {"title": "Paper", "instruction": "Write paper/draft.md",
      "when": "steps.research.status == \"DONE\" && exists(\"approved.txt\")",
      "skip": "fresh(\"paper/draft.md\")",
      "check": "size(\"paper/draft.md\") > 2000",
      "on": ["notes/**/*.md"]},
    "plain": {"title": "Plain", "instruction": "No conditions"}
  }},
  "stepQueue": ["research", "paper", "plain"],
  "currentStep": 0,
  "stepRuns": {},
  "status": "IN_PROGRESS"
}`

func TestState_Compile(t *testing.T) {
	st, err := planspec.ParseState(strings.NewReader(handWrittenState), "state.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compile(st)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.When) != 1 || len(c.Skip) != 1 || len(c.Check) != 1 {
		t.Fatalf("want one condition of each kind, got %d %d %d", len(c.When), len(c.Skip), len(c.Check))
	}
	if c.When["paper"].Source() != st.Steps["paper"].When || c.When["plain"] != nil || c.When["research"] != nil {
		t.Errorf("conditions not by step id: %+v", c.When)
	}
	paths, _ := c.When["paper"].Paths()
	if strings.Join(paths, ",") != "approved.txt" {
		t.Errorf("paths = %v", paths)
	}
	// Compiled conditions are ready to run.
	ok, err := c.Check["paper"].Eval(&Env{Root: nil})
	if !errors.Is(err, ErrNoRoot) || ok {
		t.Errorf("got %v, %v; want ErrNoRoot", ok, err)
	}
}

func TestState_CompileErrors(t *testing.T) {
	const bad = `{
  "plan": {"steps": {
    "a": {"title": "A", "instruction": "x", "when": "exist(\"x\")", "skip": "size(\"x\")",
          "requiredOutputs": ["../out", "/abs", "ok.txt"]},
    "b": {"title": "B", "instruction": "x", "check": "steps.c.status == \"DONE\"", "on": ["../**", "ok/*.md"]},
    "c d": {"title": "C", "instruction": "x", "check": "read(\"/etc/passwd\") != \"\""},
    "e": {"title": "E", "instruction": "x", "when": "vars.mni > 1"}
  }},
  "stepQueue": ["a", "b", "c d", "e"],
  "stepseq": {"vars": {"min": 2}}
}`
	st, err := planspec.ParseState(strings.NewReader(bad), "state.json")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Compile(st)
	var errs planspec.StateErrors
	if !errors.As(err, &errs) || !errors.Is(err, planspec.ErrInvalidState) {
		t.Fatalf("want StateErrors, got %T %v", err, err)
	}
	want := []string{
		`plan.steps.a.when: condition "exist(\"x\")": unknown name "exist": did you mean "exists"? (at 1:1)`,
		`plan.steps.a.skip: condition "size(\"x\")": gives int, want true or false: compare it, like size("out.md") > 0`,
		`plan.steps.b.check: no step "c" in plan.steps`,
		`plan.steps.b.on[0]: glob "../**" leaves the workspace: want a pattern without ".."`,
		`plan.steps.c d.check: condition "read(\"/etc/passwd\") != \"\"": read: absolute path "/etc/passwd": want a path relative to the workspace, like "etc/passwd" (at 1:6)`,
		`plan.steps.e.when: no var "mni" in the plan's vars: did you mean "min"?`,
	}
	if got := strings.Split(err.Error(), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A state without stepseq's keys, as the original writes it, compiles to nothing.
func TestState_CompileOriginal(t *testing.T) {
	st := planspec.NewState()
	st.Steps["a"] = &planspec.StepSpec{Title: "A", Instruction: "x", RequiredOutputs: []string{"out.md"}}
	st.StepQueue = []string{"a"}
	c, err := Compile(st)
	if err != nil || len(c.When)+len(c.Skip)+len(c.Check) != 0 {
		t.Errorf("got %+v, %v", c, err)
	}
}

var lazyRuns atomic.Int64

// CompileLazily compiles a condition when it is asked for, and only then: the
// others are never parsed. Its errors are Compile's, key by key.
func TestState_CompileLazily(t *testing.T) {
	// The compiled cache is the process's: sources of their own per run keep
	// -count=N from finding them compiled by the run before.
	dir := fmt.Sprintf("lazily%d", lazyRuns.Add(1))
	state := strings.ReplaceAll(`{
  "plan": {"steps": {
    "a": {"title": "A", "instruction": "x", "when": "exists(\"DIR/a.txt\")", "check": "exists(\"DIR/a2.txt\")"},
    "b": {"title": "B", "instruction": "x", "when": "exist(\"DIR/b.txt\")", "check": "steps.c.status == \"DONE\" || exists(\"DIR/b2.txt\")"}
  }},
  "stepQueue": ["a", "b"]
}`, "DIR", dir)
	st, err := planspec.ParseState(strings.NewReader(state), "state.json")
	if err != nil {
		t.Fatal(err)
	}
	compiled := func(id, kind string) bool { return compiledCache.get(conditionSource(st.Steps[id], kind)) != nil }
	lazy, err := CompileLazily(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		for _, kind := range []string{CondWhen, CondCheck} {
			if compiled(id, kind) {
				t.Fatalf("%s.%s compiled before it was asked for", id, kind)
			}
		}
	}
	c, err := lazy.Get("a", CondWhen)
	if err != nil || c == nil || c.Source() != st.Steps["a"].When {
		t.Fatalf("a.when: %v, %v", c, err)
	}
	if !compiled("a", CondWhen) || compiled("a", CondCheck) || compiled("b", CondWhen) {
		t.Errorf("asking for a.when compiled another condition, or not it")
	}
	if c, err := lazy.Get("a", CondSkip); c != nil || err != nil {
		t.Errorf("a.skip, unset: %v, %v; want nil, nil", c, err)
	}
	if err := lazy.Err(); err != nil {
		t.Errorf("Err before a bad condition: %v", err)
	}

	_, eager := Compile(st)
	var want planspec.StateErrors
	if !errors.As(eager, &want) || len(want) != 2 {
		t.Fatalf("Compile: %v; want two errors", eager)
	}
	for i, kind := range []string{CondWhen, CondCheck} {
		c, err := lazy.Get("b", kind)
		if c != nil || err == nil || err.Error() != want[i].Error() {
			t.Errorf("b.%s: %v, %v; want %q", kind, c, err, want[i])
		}
	}
	if err := lazy.Err(); err == nil || err.Error() != eager.Error() {
		t.Errorf("Err = %v; want %v", err, eager)
	}
}

// CompileLazily checks the on globs at once, as Compile does.
func TestState_CompileLazilyGlobs(t *testing.T) {
	st := planspec.NewState()
	st.Steps["a"] = &planspec.StepSpec{Title: "A", Instruction: "x", On: []string{"ok/*.md", "../**"}}
	st.Steps["b"] = &planspec.StepSpec{Title: "B", Instruction: "x", On: []string{"/abs/**"}}
	st.StepQueue = []string{"b", "a"}
	_, eager := Compile(st)
	_, lazy := CompileLazily(st)
	if eager == nil || lazy == nil || lazy.Error() != eager.Error() {
		t.Errorf("CompileLazily: %v\nCompile: %v", lazy, eager)
	}
}
