package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/stepseq/stepseq/planspec"
)

// MaxPlanSize caps a plan file. A plan is a few kilobytes; a generated one of
// 10,000 steps is about 1.5 MB. Anything over the cap is not a plan, and is
// refused after reading the cap and no more, before it is parsed: a hostile
// file costs one bounded read (TestParsePlan_Hostile, BenchmarkParsePlanHostile).
const MaxPlanSize = 8 << 20

// Plan is a YAML plan: what a plan file declares, decoded and validated.
type Plan struct {
	// Settings are what the plan sets for its steps and runs, as the state that
	// runs it carries them (agent, fallback, retries, timeouts, vars, summary,
	// reports, heartbeat, limitWait, resume, notify).
	// A run's part (Settings.Params' values, SummaryValues, Source, Hash) is
	// empty in a plan: State fills Source and Hash.
	planspec.Settings
	StepDelay planspec.Duration
	// Params declares the plan's params; a run's values are
	// Settings.Params, which this field hides in a Plan.
	Params []Param
	// Steps are every step in file order, a group's steps in its place;
	// Settings.Groups are the repeat groups among them.
	Steps []PlanStep

	// envConds are the conditions that read env(), envUses where the file has
	// each (its message the condition's key), for CheckEnv.
	envConds []*Condition
	envUses  []*PlanError
}

// PlanStep is one step of a plan, in file order.
type PlanStep struct {
	ID   string
	Spec planspec.StepSpec
}

// ParsePlan reads and validates a YAML plan. name is the file name used in
// messages and for the default plan name. Every problem is reported, as a
// *multierror.Error of *PlanError sorted by position; an error reading r is
// returned as it is.
func ParsePlan(r io.Reader, name string) (*Plan, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxPlanSize+1))
	if err != nil {
		return nil, fmt.Errorf("read plan %s: %w", name, err)
	}
	d := &planDecoder{file: name}
	p := d.decode(data)
	if err := planErrors(d.errs); err != nil {
		return nil, err
	}
	if p.Name == "" {
		p.Name = PlanName(name)
	}
	return p, nil
}

// CheckEnv refuses, located, every condition that reads a name of the
// environment not in exposed, or a name built at run time: a plan that arrives
// through a face (plan_submit, run_start) reads only what the operator exposes
// with --expose-env, since which step runs next would otherwise spell out any
// variable one bit at a time. Nil when every condition may run.
func (p *Plan) CheckEnv(exposed []string) error {
	var errs []*PlanError
	for i, c := range p.envConds {
		if msg := UnexposedEnv(c, exposed); msg != "" {
			e := *p.envUses[i]
			e.Msg += ": " + msg
			errs = append(errs, &e)
		}
	}
	return planErrors(errs)
}

// PlanName is the name of a plan that does not give one: its file name without
// .plan.yaml, .plan.yml, .yaml or .yml.
func PlanName(file string) string {
	base := filepath.Base(filepath.ToSlash(file))
	for _, ext := range []string{".plan.yaml", ".plan.yml", ".yaml", ".yml"} {
		if s, ok := strings.CutSuffix(base, ext); ok {
			base = s
			break
		}
	}
	if base == "" || base == "." || base == ".." || base == "/" {
		return "plan"
	}
	return base
}

// Hash is the content hash stepseq records for a plan file: "sha256:<hex>".
func Hash(content []byte) string {
	sum := sha256.Sum256(content)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// State returns the state.json that runs this plan from its first step. source is
// the plan file relative to the workspace, hash its Hash. The state shares nothing
// mutable with the plan.
func (p *Plan) State(source, hash string) *planspec.State {
	st := planspec.NewState()
	for _, s := range p.Steps {
		spec := s.Spec
		spec.RequiredOutputs = slices.Clone(spec.RequiredOutputs)
		spec.On = slices.Clone(spec.On)
		spec.Agent = spec.Agent.Clone()
		spec.Fallback = slices.Clone(spec.Fallback)
		spec.Result = slices.Clone(spec.Result)
		if planspec.HasTemplate(spec.Instruction) {
			spec.InstructionTemplate = spec.Instruction
		}
		if planspec.HasTemplate(spec.Title) {
			spec.TitleTemplate = spec.Title
		}
		if spec.Agent.HasTemplate() {
			spec.AgentTemplate = spec.Agent.Clone()
		}
		if spec.Retries != nil {
			n := *spec.Retries
			spec.Retries = &n
		}
		if spec.Resume != nil {
			b := *spec.Resume
			spec.Resume = &b
		}
		st.Steps[s.ID] = &spec
		st.StepQueue = append(st.StepQueue, s.ID)
	}
	st.StepDelayMinutes = float64(p.StepDelay) / float64(time.Minute)
	st.Settings = p.Settings.Clone()
	st.Settings.Source, st.Settings.Hash = filepath.ToSlash(source), hash
	return st
}
