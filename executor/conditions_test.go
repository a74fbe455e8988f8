package executor

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stepseq/stepseq/planspec"
)

// TestConditions_SeeTheInputsTime: a condition's now() is the time the machine
// handles the input at, the one it is given, never the wall clock read on the
// way: a scenario that scripts the time scripts what conditions see.
func TestConditions_SeeTheInputsTime(t *testing.T) {
	dir := t.TempDir()
	rt, err := NewRuntime(filepath.Join(dir, "state.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	rt.Now = func() time.Time { t.Fatal("a condition read the runtime's clock"); return time.Time{} }
	st := parse(t, `{"plan":{"steps":{"a":{"title":"A","instruction":"do a","when":"now().Year() == 2001","check":"now().Year() == 2002"}}},
 "stepQueue":["a"],"currentStep":0,"stepRuns":{},"stepDelayMinutes":0,"blockers":[],"status":"IN_PROGRESS"}`)
	conds, err := rt.Conditions(st)
	if err != nil {
		t.Fatal(err)
	}
	y2001 := time.Date(2001, 6, 1, 0, 0, 0, 0, time.UTC)
	y2002 := y2001.AddDate(1, 0, 0)
	if ok, err := conds.Cond(y2001, "a", "when"); err != nil || !ok {
		t.Errorf("when at 2001 = %v, %v; want true", ok, err)
	}
	if ok, err := conds.Cond(y2002, "a", "when"); err != nil || ok {
		t.Errorf("when at 2002 = %v, %v; want false", ok, err)
	}
	if ok, err := conds.Check(y2002, "a")(); err != nil || !ok {
		t.Errorf("check at 2002 = %v, %v; want true", ok, err)
	}
}

// TestConditions_Reads: what a step's gate reads, for telling its agent which
// change started it: when's and skip's literal paths and globs, not check's;
// unknown once a path is built at run time.
func TestConditions_Reads(t *testing.T) {
	rt, err := NewRuntime(filepath.Join(t.TempDir(), "state.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	st := parse(t, `{"plan":{"steps":{
 "a":{"title":"A","instruction":"do a","when":"exists(\"go.txt\")","skip":"len(glob(\"skip/*\")) > 0","check":"exists(\"out.txt\")"},
 "b":{"title":"B","instruction":"do b","when":"exists(step.title)"},
 "c":{"title":"C","instruction":"do c"}}},
 "stepQueue":["a","b","c"],"currentStep":0,"stepRuns":{},"stepDelayMinutes":0,"blockers":[],"status":"IN_PROGRESS"}`)
	conds, err := rt.Conditions(st)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"a": "[go.txt] [skip/*] true", "b": "[] [] false", "c": "[] [] true"} {
		paths, globs, known := conds.Reads(id)
		if got := fmt.Sprint(paths, " ", globs, " ", known); got != want {
			t.Errorf("Reads(%s) = %s, want %s", id, got, want)
		}
	}
}

// TestCheck_EnvNeverReachesTheState: a check that fails on what env() gave,
// converted, split and joined, upper-cased or sliced, fails its try with the
// expression and the kind of failure; no byte of the value, whole or
// transformed, reaches state.json, the journal or the try's log.
func TestCheck_EnvNeverReachesTheState(t *testing.T) {
	const secret = "hunter2-9f8e7d"
	leaks := []string{"hunter", "HUNTER", "h_u_n", "9f8e", "9F8E", "nter2"}
	for _, check := range []string{
		`int(join(split(env("S"), ""), "_")) > 0`,
		`int(upper(env("S"))) > 0`,
		`int(lower(env("S"))[2:]) > 0`,
		`split(env("S"), "-")[7] == ""`,
	} {
		t.Run(check, func(t *testing.T) {
			w := newTestWS(t, plan(`"stepseq":{"maxRetries":1}`, `"instruction":"out:ok","check":`+strconv.Quote(check)))
			w.env["S"] = secret
			if err := w.check(); err != nil {
				t.Fatal(err)
			}
			for _, rel := range []string{"state.json", ".stepseq/journal.jsonl", ".stepseq/logs/s1/1.log"} {
				data, err := os.ReadFile(w.path(rel))
				if err != nil {
					t.Fatal(err)
				}
				for _, l := range leaks {
					if strings.Contains(string(data), l) {
						t.Errorf("%s holds %q of the value:\n%s", rel, l, data)
					}
				}
			}
			r := w.read().Run("s1")
			if r.Status != planspec.StatusFailed || r.Error == nil || !strings.Contains(*r.Error, "(the expression reads env(), so what it evaluated is not shown)") {
				t.Errorf("run %s, error %q: want FAILED with the expression and the kind of failure", r.Status, deref(r.Error))
			}
		})
	}
}
