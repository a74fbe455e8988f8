package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stepseq/stepseq/planspec"
)

// The budget is the state's, not the process's: the built stepseq, killed
// with SIGKILL while a try runs and started again, counts on from where it
// was, and holds the run at the bound; `stepseq budget` raises it and the
// live sidecar goes on. The agent is a claude whose output is the real
// claude's (testdata/usage in executor/proc).
func TestBudget_SurvivesKillAndRaise(t *testing.T) {
	bin := stepseqBinary(t)
	dir, work := t.TempDir(), t.TempDir()
	fixture, err := filepath.Abs("../proc/testdata/usage/claude-2.1.332.json")
	if err != nil {
		t.Fatal(err)
	}
	// The agent of a step whose prompt says hold waits for release first: the
	// kill comes while it runs.
	agent := "#!/bin/sh\ncase \"$*\" in *hold*) touch " + work + "/held; while [ ! -e " + work + "/release ]; do sleep 0.01; done;; esac\ncat " + fixture + "\n"
	if err := os.WriteFile(filepath.Join(work, "claude"), []byte(agent), 0o755); err != nil {
		t.Fatal(err)
	}
	plan := "name: spend\nagent: claude\nbudget: {tries: 3}\nsteps:\n"
	for _, s := range []string{"a", "b", "c", "d", "e"} {
		instr := "do " + s
		if s == "b" {
			instr += " hold"
		}
		plan += "  - {id: " + s + ", title: " + strings.ToUpper(s) + ", instruction: " + instr + "}\n"
	}
	if err := os.WriteFile(filepath.Join(work, "spend.yaml"), []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+work+":"+os.Getenv("PATH"), "STEP_AGENT_CMD=")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("stepseq %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("apply", filepath.Join(work, "spend.yaml"), dir)

	watch := func() *exec.Cmd {
		cmd := exec.Command(bin, "watch", dir)
		cmd.Env = env
		var logs bytes.Buffer
		cmd.Stderr = &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("sidecar %d:\n%s", cmd.Process.Pid, logs.String())
			}
		})
		return cmd
	}
	state := func() *planspec.State {
		data, err := os.ReadFile(filepath.Join(dir, "state.json"))
		if err != nil {
			return nil
		}
		st, err := planspec.ParseStateBytes(data, "state.json")
		if err != nil {
			return nil
		}
		return st
	}
	waitFor := func(what string, cond func(st *planspec.State) bool) *planspec.State {
		t.Helper()
		deadline := time.Now().Add(effectWait)
		for {
			if st := state(); st != nil && cond(st) {
				return st
			}
			if time.Now().After(deadline) {
				data, _ := os.ReadFile(filepath.Join(dir, "state.json"))
				t.Fatalf("never %s; state:\n%s", what, data)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	first := watch()
	st := waitFor("b running after a's usage", func(st *planspec.State) bool {
		r := st.StepRuns["b"]
		return r != nil && r.Status == planspec.StatusInProgress && st.Settings.Spend.Tries == 2
	})
	if got := st.Settings.Spend; got.CostUSD != 0.0089 || got.Tokens() != 6580 {
		t.Fatalf("after a: spend %+v", got)
	}
	deadline := time.Now().Add(effectWait)
	for _, err := os.Stat(filepath.Join(work, "held")); err != nil; _, err = os.Stat(filepath.Join(work, "held")) {
		if time.Now().After(deadline) {
			t.Fatal("b's agent never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()

	// Started again: the count goes on from 2 tries and $0.0089, and c is the
	// third and last try. b's try was interrupted: its agent, released now,
	// ends under the new sidecar (its figure lost: unknown) or before it
	// looks (the same try runs again, and says its figure).
	watch()
	if err := os.WriteFile(filepath.Join(work, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	st = waitFor("held by the budget", func(st *planspec.State) bool { return st.Settings.BudgetHeld != "" })
	if st.Settings.BudgetHeld != "budget: 3 of 3 tries spent (tries)" || st.StepQueue[st.CurrentStep] != "d" {
		t.Fatalf("held: %q at %s", st.Settings.BudgetHeld, st.StepQueue[st.CurrentStep])
	}
	lost := st.Settings.Spend.Unknown
	if s := st.Settings.Spend; s.Tries != 3 || lost > 1 || s.CostUSD != planspec.Round6(0.0089*float64(3-lost)) {
		t.Fatalf("spend after the kill: %+v", s)
	}
	if r := st.StepRuns["d"]; r != nil && r.Tries > 0 {
		t.Fatalf("d launched past the budget: %+v", r)
	}
	var status struct {
		Spend struct {
			Held  string  `json:"held"`
			Cost  float64 `json:"costUsd"`
			Tries int     `json:"tries"`
		} `json:"spend"`
		WaitingFor struct {
			Action string `json:"action"`
		} `json:"waitingFor"`
	}
	cmd := exec.CommandContext(context.Background(), bin, "status", "--json", dir)
	cmd.Env = env
	out, _ := cmd.Output() // exit 1: the plan is blocked
	if err := json.Unmarshal(out, &status); err != nil || status.WaitingFor.Action != "budget" || status.Spend.Tries != 3 {
		t.Fatalf("status --json: %v\n%s", err, out)
	}

	// The raise reaches the live sidecar, which goes on to the end.
	if out := run("budget", "tries=+2", dir); !strings.Contains(out, "tries=+2") {
		t.Fatalf("stepseq budget: %s", out)
	}
	st = waitFor("done", func(st *planspec.State) bool { return st.Status == planspec.StatusDone })
	if s := st.Settings.Spend; s.Tries != 5 || s.CostUSD != planspec.Round6(0.0089*float64(5-lost)) || st.Settings.Budget.Tries != 5 || st.Settings.BudgetHeld != "" {
		t.Fatalf("spend at the end: %+v, budget %s, held %q", s, st.Settings.Budget, st.Settings.BudgetHeld)
	}
	if u := st.StepRuns["e"].Agent.Usage; len(u) != 1 || u[0].Model != "claude-opus-5-5" || u[0].CacheTokens != 5300 {
		t.Fatalf("e's usage: %+v", u)
	}
	text := run("status", dir)
	if !strings.Contains(text, "spend: $0.04, ") || !strings.Contains(text, "5 tries") || !strings.Contains(text, "; budget tries=5") {
		t.Fatalf("status:\n%s", text)
	}
}
