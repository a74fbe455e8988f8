package engine

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// AgentAtStart is why a sidecar about to start could never launch the agent
// its workspace waits for, a configuration error (errors.Is core.ErrConfig)
// worded as check words it; nil when nothing waits for it.
//
// STEP_AGENT_CMD refused by the shell rule is such an error whatever the
// workspace holds: it never runs. STEP_AGENT_CMD unset, or naming a program
// that is not there, is one only when some step needs it: a step with no
// agent of its own (nor its plan's) in a run that can go on (not DONE, not
// blocked, not a copy of another run) or in a plan waiting in plansDir. A
// workspace whose plans all name their agent needs none, and neither does an
// empty one: a sidecar started before its first plan waits for it, as check
// with no state has nothing to do.
func (r *Runtime) AgentAtStart(plansDir string) error {
	_, err := r.envAgent()
	if err == nil || r.envAgentRunsCode() {
		return err
	}
	needs := r.needsEnvAgent(plansDir)
	if needs == "" {
		return nil
	}
	var ce *core.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	return &core.ConfigError{Msg: fmt.Sprintf("%s (%s names no agent of its own)", ce.Msg, needs)}
}

// envAgent is STEP_AGENT_CMD as a step with no agent of its own resolves it,
// with the error a launch would meet.
func (r *Runtime) envAgent() (proc.Agent, error) {
	return proc.ResolveAgent(&planspec.State{}, "", r.Getenv, r.WS.Dir)
}

// envAgentRunsCode reports whether the shell rule refuses STEP_AGENT_CMD,
// which then never runs, whatever step would need it.
func (r *Runtime) envAgentRunsCode() bool {
	dir := r.WS.Dir
	argv := strings.Fields(r.Getenv("STEP_AGENT_CMD"))
	return planspec.CheckAgentArgv(argv, func(w string) string { return proc.ResolveProgram(w, dir) }) != nil
}

// needsEnvAgent names the first step that would run STEP_AGENT_CMD, "" when
// none would: in a run that can go on, then in a plan waiting in plansDir.
func (r *Runtime) needsEnvAgent(plansDir string) string {
	names, _ := store.RunNames(r.WS.ForRun(store.MainRun))
	var main *planspec.State
	for _, name := range names {
		rw := r.WS.ForRun(name)
		st, err := (&store.StateFile{Path: rw.State}).Read()
		if err != nil {
			continue // a file that does not parse runs nothing; the sidecar says why
		}
		if name == store.MainRun {
			main = st
		}
		if id := runNeedsEnvAgent(st, name); id != "" {
			return fmt.Sprintf("step %s of %s", id, filepath.Base(rw.State))
		}
	}
	plans, _ := ListPlans(r.WS, plansDir, main)
	for _, l := range plans {
		if l.Status != PlanNew && l.Status != PlanQueued {
			continue
		}
		pf := ReadPlanFile(filepath.Join(plansDir, filepath.Base(l.File)), l.File)
		if pf.Plan == nil || !pf.Plan.Agent.IsZero() {
			continue
		}
		for _, s := range pf.Plan.Steps {
			if s.Spec.Agent.IsZero() {
				return fmt.Sprintf("step %s of %s", s.ID, l.File)
			}
		}
	}
	return ""
}

// runNeedsEnvAgent is the first step of run name's state that would run
// STEP_AGENT_CMD: not done, with no agent of its own nor its plan's, in a run
// that can go on (active, not a copy of another run); "" when none would.
func runNeedsEnvAgent(st *planspec.State, name string) string {
	if st.CopyOf(name) != "" || core.RunWord(st) != core.RunActive || !st.Settings.Agent.IsZero() {
		return ""
	}
	for _, id := range st.StepQueue {
		if run := st.StepRuns[id]; run != nil && run.Status == planspec.StatusDone {
			continue
		}
		if spec := st.Steps[id]; spec != nil && spec.Agent.IsZero() {
			return id
		}
	}
	return ""
}
