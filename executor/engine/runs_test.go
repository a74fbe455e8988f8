package engine

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
	planpkg "github.com/stepseq/stepseq/planspec/plan"
)

func testRunPlan(t *testing.T, dir, name, yaml string) core.PlanFile {
	t.Helper()
	// Not in plans/, which a sidecar would take up as the workspace's own run.
	path := filepath.Join(dir, "defs", name+".yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return ReadPlanFile(path, "defs/"+name+".yaml")
}

func TestStartRun_NamesAndParams(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rt, err := NewRuntime(filepath.Join(dir, "state.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	rt.Getenv = func(k string) string {
		if k == "STEP_AGENT_CMD" {
			return "true"
		}
		return ""
	}
	pf := testRunPlan(t, dir, "rev", "name: rev\nparams:\n  ticket: {type: string}\nsteps:\n  - id: a\n    title: A\n    instruction: do ${params.ticket}\n")

	var pe *planpkg.ParamsError
	if _, err := rt.StartRun(RunStart{Plan: pf}); !errors.As(err, &pe) {
		t.Fatalf("a required param not given: %v, want a *ParamsError", err)
	}
	// Starts at once get a name each.
	var wg sync.WaitGroup
	names := make([]string, 8)
	for i := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			info, err := rt.StartRun(RunStart{Plan: pf, Params: map[string]any{"ticket": "T"}})
			if err != nil {
				t.Error(err)
			}
			names[i] = info.Name
		}()
	}
	wg.Wait()
	slices.Sort(names)
	want := []string{"rev", "rev-2", "rev-3", "rev-4", "rev-5", "rev-6", "rev-7", "rev-8"}
	if !slices.Equal(names, want) {
		t.Fatalf("names %v, want %v", names, want)
	}
	if _, err := rt.StartRun(RunStart{Plan: pf, Params: map[string]any{"ticket": "T"}, Name: "rev-3"}); !errors.Is(err, store.ErrRunExists) {
		t.Fatalf("a name taken: %v", err)
	}
	runs, err := store.ListRuns(rt.WS)
	if err != nil || len(runs) != 8 {
		t.Fatalf("ListRuns: %d runs, %v", len(runs), err)
	}
	if r := runs[0]; r.Name != "rev" || r.Plan != "rev" || r.Status != store.RunActive || r.Steps != 1 || r.Current != "a" || r.Params["ticket"] != "T" {
		t.Errorf("first run: %+v", r)
	}
	// A broken run file is listed as invalid, with the reason; the others as they are.
	if err := os.WriteFile(filepath.Join(dir, "state.broken.json"), []byte("{\n  \"stepQueue\": [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runs, _ = store.ListRuns(rt.WS)
	i := slices.IndexFunc(runs, func(r store.RunInfo) bool { return r.Name == "broken" })
	if i < 0 || runs[i].Status != store.RunInvalid || !strings.Contains(runs[i].Error, "state.broken.json") {
		t.Fatalf("broken run: %+v", runs)
	}
	// Closed without a sidecar: archived, listed closed, and closed again is the same answer.
	info, err := closeRunFiles(rt.WS, "rev-2", proc.DefaultGrace)
	if err != nil || info.Status != store.RunClosed {
		t.Fatalf("CloseRun: %+v, %v", info, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "state.rev-2.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the closed run's file stays: %v", err)
	}
	if again, err := closeRunFiles(rt.WS, "rev-2", proc.DefaultGrace); err != nil || again.Status != store.RunClosed {
		t.Fatalf("closed twice: %+v, %v; want the closed run as the answer", again, err)
	}
	if _, err := rt.StartRun(RunStart{Plan: pf, Params: map[string]any{"ticket": "T"}, Name: "rev-2"}); !errors.Is(err, store.ErrRunExists) {
		t.Fatalf("a closed run's name is taken until it is pruned: %v", err)
	}
}
