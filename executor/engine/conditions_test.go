package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stepseq/stepseq/planspec"
	planpkg "github.com/stepseq/stepseq/planspec/plan"
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

// TestConditions_FaceReadsOnlyExposedEnv: the conditions of a run whose plan
// arrived through a face (its state's face key, which a restart reads back)
// read only the names --expose-env lists: one reading another name is refused
// when the conditions a driver runs are compiled, naming the key and the flag,
// and env() of a name not exposed gives nothing. A state without the key reads the
// whole environment, as a plan of the workspace's does.
func TestConditions_FaceReadsOnlyExposedEnv(t *testing.T) {
	env := map[string]string{"DEPLOY": "prod", "TOKEN": "s3cret"}
	rt, err := NewRuntime(filepath.Join(t.TempDir(), "state.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	rt.Getenv = func(k string) string { return env[k] }
	state := func(face, when string) *planspec.State {
		return parse(t, `{"plan":{"steps":{"a":{"title":"A","instruction":"do a","when":`+strconv.Quote(when)+`}}},
 "stepQueue":["a"],"currentStep":0,"stepRuns":{},"stepDelayMinutes":0,"blockers":[],"status":"IN_PROGRESS","stepseq":{"face":`+strconv.Quote(face)+`}}`)
	}
	rt.ExposeEnv = []string{"DEPLOY"}
	_, err = rt.Conditions(state("mcp", `env("TOKEN") == "s3cret"`))
	want := `plan.steps.a.when: env("TOKEN"): a plan that arrives through MCP (plan_submit, run_start) reads only the environment the operator exposes (--expose-env TOKEN on watch or mcp)`
	if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, planspec.ErrInvalidState) {
		t.Errorf("a face's run reading TOKEN: %v\nwant %s", err, want)
	}
	// A report's view (compiled lazily, perhaps in another process than the
	// sidecar's) is not refused, and reads nothing of the name.
	lazy, err := rt.lazyConditions(state("mcp", `env("TOKEN") == "s3cret"`))
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := lazy.Cond(time.Now(), "a", planpkg.CondWhen); err != nil || ok {
		t.Errorf("compiled lazily: %v, %v; want false, no error", ok, err)
	}
	for _, tc := range []struct {
		face, when string
		expose     []string
		open       bool
	}{
		{"mcp", `env("DEPLOY") == "prod"`, []string{"DEPLOY"}, true},
		{"", `env("TOKEN") == "s3cret"`, nil, true},
		{"mcp", `env("TOKEN") == "s3cret"`, []string{"TOKEN"}, true},
	} {
		rt.ExposeEnv = tc.expose
		conds, err := rt.Conditions(state(tc.face, tc.when))
		if err != nil {
			t.Fatalf("%s %s: %v", tc.face, tc.when, err)
		}
		if ok, err := conds.Cond(time.Now(), "a", planpkg.CondWhen); err != nil || ok != tc.open {
			t.Errorf("face %q, %s, exposed %v: %v, %v; want %v", tc.face, tc.when, tc.expose, ok, err, tc.open)
		}
	}
	// What the compile check cannot see (a state it did not check) still
	// reads nothing: env() of a name not exposed is empty.
	c := &Conditions{rt: rt, st: state("mcp", "true")}
	rt.ExposeEnv = []string{"DEPLOY"}
	if got := c.getenv("TOKEN"); got != "" {
		t.Errorf("env(TOKEN) in a face's run = %q, want empty", got)
	}
}

// TestCheck_FaceRunReadsNoEnvAfterARestart: what bounds a face's run lives in
// its state: a driver that reads state.json afresh (a check, a restarted
// sidecar) launches nothing for a face's run whose gate reads an unexposed
// name, and journals why; the same state without the face key runs.
func TestCheck_FaceRunReadsNoEnvAfterARestart(t *testing.T) {
	for _, face := range []string{"mcp", ""} {
		w := newTestWS(t, plan(`"stepseq":{"face":`+strconv.Quote(face)+`}`, `"instruction":"write:out.txt","when":"env(\"GATE\") == \"open\""`))
		w.env["GATE"] = "open"
		if err := w.check(); err != nil {
			t.Fatal(err)
		}
		_, statErr := os.Stat(w.path("out.txt"))
		journal, _ := os.ReadFile(w.path(".stepseq/journal.jsonl"))
		said := strings.Contains(string(journal), `"event":"state-invalid"`) && strings.Contains(string(journal), `--expose-env GATE`)
		switch {
		case face != "" && (statErr == nil || !said):
			t.Errorf("a face's run: out.txt %v; want nothing run and the journal saying why:\n%s", statErr, journal)
		case face == "" && statErr != nil:
			t.Errorf("the workspace's run: out.txt %v; want run", statErr)
		}
	}
}
