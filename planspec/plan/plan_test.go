package plan

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-multierror"
	"github.com/stepseq/stepseq/planspec"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ from what the code produces")

const plansDir = "../../testdata/plans"

// golden compares got with the file, or rewrites the file with -update.
func golden(t *testing.T, file string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test ./planspec/plan -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got; go test ./planspec/plan -update rewrites it):\n%s", file, diff)
	}
}

// TestParsePlan_Golden reads every plan under testdata/plans: a good plan
// (*.yaml) must become the state.json beside it (*.state.json) and the graph
// (*.mmd); a bad one (bad/*.yaml) must fail with the errors beside it (*.err).
func TestParsePlan_Golden(t *testing.T) {
	good, _ := filepath.Glob(filepath.Join(plansDir, "*.yaml"))
	bad, _ := filepath.Glob(filepath.Join(plansDir, "bad", "*.yaml"))
	if len(good) == 0 || len(bad) == 0 {
		t.Fatalf("no plans under %s", plansDir)
	}
	for _, file := range good {
		base := strings.TrimSuffix(file, ".yaml")
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			p, err := ParsePlan(bytes.NewReader(data), filepath.Base(file))
			if err != nil {
				t.Fatalf("want a valid plan, got:\n%v", err)
			}
			st := p.State("plans/"+filepath.Base(file), Hash(data))
			out := st.Marshal()
			golden(t, base+".state.json", out)
			golden(t, base+".mmd", []byte(p.Mermaid()))

			// The state is one the original can run and stepseq can compile.
			back, err := planspec.ParseState(bytes.NewReader(out), "state.json")
			if err != nil {
				t.Fatalf("the plan's state does not parse: %v", err)
			}
			if !bytes.Equal(back.Marshal(), out) {
				t.Error("the plan's state changes when read and written again")
			}
			if _, err := Compile(back); err != nil {
				t.Errorf("the plan's state does not compile: %v", err)
			}
		})
	}
	for _, file := range bad {
		t.Run("bad/"+filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			p, err := ParsePlan(bytes.NewReader(data), "bad/"+filepath.Base(file))
			if err == nil {
				t.Fatalf("want errors, got a plan with %d steps", len(p.Steps))
			}
			checkPlanErrors(t, err)
			golden(t, strings.TrimSuffix(file, ".yaml")+".err", []byte(err.Error()+"\n"))
		})
	}
}

// checkPlanErrors checks the shape of ParsePlan's error: a multierror of
// located PlanErrors, sorted, one line each.
func checkPlanErrors(t *testing.T, err error) {
	t.Helper()
	var me *multierror.Error
	if !errors.As(err, &me) {
		t.Fatalf("want a *multierror.Error, got %T", err)
	}
	if !errors.Is(err, ErrInvalidPlan) {
		t.Error("errors.Is(err, ErrInvalidPlan) is false")
	}
	prev := &PlanError{}
	for _, e := range me.Errors {
		pe, ok := e.(*PlanError)
		if !ok {
			t.Fatalf("want *PlanError, got %T: %v", e, e)
		}
		if pe.Line < 1 || pe.Col < 1 || pe.Msg == "" || strings.Contains(pe.Msg, "\n") {
			t.Errorf("error without a position or on several lines: %#v", pe)
		}
		if pe.Line < prev.Line || pe.Line == prev.Line && pe.Col < prev.Col {
			t.Errorf("errors out of order: %v before %v", prev, pe)
		}
		prev = pe
	}
	if got, want := strings.Count(err.Error(), "\n")+1, len(me.Errors); got != want {
		t.Errorf("%d errors on %d lines", want, got)
	}
}

func TestParsePlan_Defaults(t *testing.T) {
	p, err := ParsePlan(strings.NewReader("steps: [{id: a, title: A, instruction: do a}]\n"), "plans/nightly.plan.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "nightly" || p.MaxRetries != nil || !p.Agent.IsZero() || p.Fallback != nil || p.StepDelay != 0 || p.Timeout != 0 || p.Vars != nil {
		t.Errorf("defaults: %+v", p)
	}
	if len(p.Steps) != 1 || p.Steps[0].ID != "a" || p.Steps[0].Spec.Instruction != "do a" {
		t.Errorf("steps: %+v", p.Steps)
	}
}

func TestPlan_State(t *testing.T) {
	src := `
name: p
agent: [a, b]
stepDelay: 90s
maxRetries: 2
timeout: 2h
vars: {k: v}
steps:
  - {id: one, title: One, instruction: do one, requiredOutputs: [x], retries: 4, agent: [c]}
  - {id: two, title: Two, instruction: do two}
`
	p, err := ParsePlan(strings.NewReader(src), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st := p.State("plans/p.yaml", "sha256:abc")
	if st.StepDelayMinutes != 1.5 {
		t.Errorf("stepDelayMinutes = %v, want 1.5", st.StepDelayMinutes)
	}
	if diff := cmp.Diff([]string{"one", "two"}, st.StepQueue); diff != "" {
		t.Errorf("stepQueue: %s", diff)
	}
	if st.CurrentStep != 0 || st.Status != planspec.StatusInProgress || len(st.StepRuns) != 0 {
		t.Errorf("not a fresh state: %+v", st)
	}
	s := st.Settings
	if s.Name != "p" || s.Source != "plans/p.yaml" || s.Hash != "sha256:abc" || *s.MaxRetries != 2 ||
		s.Timeout != planspec.Duration(7200e9) || s.Vars["k"] != "v" || len(s.Agent.Argv) != 2 {
		t.Errorf("settings: %+v", s)
	}

	// The state shares nothing mutable with the plan.
	st.Steps["one"].RequiredOutputs[0] = "changed"
	*st.Steps["one"].Retries = 9
	st.Settings.Agent.Argv[0] = "changed"
	*st.Settings.MaxRetries = 9
	st.Settings.Vars["k"] = "changed"
	if p.Steps[0].Spec.RequiredOutputs[0] != "x" || *p.Steps[0].Spec.Retries != 4 || p.Agent.Argv[0] != "a" ||
		*p.MaxRetries != 2 || p.Vars["k"] != "v" {
		t.Error("changing the state changed the plan")
	}
}

func TestPlanName(t *testing.T) {
	for file, want := range map[string]string{
		"plans/research.yaml":      "research",
		"research.yml":             "research",
		"/ws/nightly.plan.yaml":    "nightly",
		"x.plan.yml":               "x",
		"no-extension":             "no-extension",
		"plans/.yaml":              "plan",
		"":                         "plan",
		"a.b.c.yaml":               "a.b.c",
		`plans\windows-style.yaml`: `plans\windows-style`,
	} {
		if got := PlanName(file); got != want {
			t.Errorf("PlanName(%q) = %q, want %q", file, got, want)
		}
	}
}

func TestHash(t *testing.T) {
	if got, want := Hash([]byte("abc")), "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; got != want {
		t.Errorf("Hash = %s, want %s", got, want)
	}
}

func TestPlanError_Error(t *testing.T) {
	e := &PlanError{File: "plans/a.yaml", Line: 3, Col: 5, Field: "steps[0].titel", Msg: `unknown key "titel": did you mean "title"?`}
	if got, want := e.Error(), `plans/a.yaml:3:5: unknown key "titel": did you mean "title"?`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestParsePlan_ReadError(t *testing.T) {
	boom := errors.New("boom")
	_, err := ParsePlan(&failingReader{err: boom}, "x.yaml")
	if !errors.Is(err, boom) || errors.Is(err, ErrInvalidPlan) {
		t.Errorf("want the read error, got %v", err)
	}
}

type failingReader struct{ err error }

func (r *failingReader) Read([]byte) (int, error) { return 0, r.err }

func TestSuggest(t *testing.T) {
	for _, tc := range []struct{ word, want string }{
		{"titel", "title"},
		{"Title", "title"},
		{"instructions", "instruction"},
		{"requiredOutput", "requiredOutputs"},
		{"awaitOutput", "awaitOutputs"},
		{"retry", "retries"}, // the singular of a key is its typo
		{"frobnicate", ""},
		{"x", ""},
	} {
		if got := planspec.Suggest(tc.word, stepKeys); got != tc.want {
			t.Errorf("Suggest(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
}

// Windows line endings and a byte-order mark, as editors on Windows write them.
func TestParsePlan_CRLF(t *testing.T) {
	src := "\ufeffname: crlf\r\nsteps:\r\n  - id: a\r\n    title: A\r\n    instruction: do a\r\n    check: |\r\n      exists(\"a\")\r\n"
	p, err := ParsePlan(strings.NewReader(src), "crlf.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "crlf" || p.Steps[0].Spec.Instruction != "do a" || strings.Contains(p.Steps[0].Spec.Check, "\r") {
		t.Errorf("got %+v", p.Steps[0].Spec)
	}
}

// TestParsePlan_Webhook: a plan's sink that is not an http or https URL is
// refused, located and naming it.
func TestParsePlan_Webhook(t *testing.T) {
	src := "notify: [{webhook: ftp://example.com/x}]\nsteps:\n  - id: a\n    title: A\n    instruction: do a\n"
	_, err := ParsePlan(strings.NewReader(src), "n.yaml")
	if want := `n.yaml:1:10: webhook "ftp://example.com/x": want an http or https URL, like https://ntfy.sh/my-topic`; err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}
