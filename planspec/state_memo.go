package planspec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// encodeMemo remembers the encoding of the parts of a state that rarely change, so
// that writing the state after each step re-encodes only the runs that changed: the
// plan and most runs are copied as they were. A part is reused only when it is equal,
// field by field, to the copy taken when it was encoded.
type encodeMemo struct {
	planSteps    map[string]*StepSpec // copies of the specs encoded
	planPtrs     map[string]*StepSpec // the specs encoded, for a state whose specs are frozen
	frozen       bool                 // specs are replaced, never edited in place: see FreezeSpecs
	planRaw      json.RawMessage
	planIndented []byte // planRaw at depth one, in the layout planLines says; nil until needed
	planLines    bool
	runs         map[string]*memoRun
	runOrder     []string     // stepRuns keys in file order
	stepsOrder   []string     // plan.steps keys in file order
	lastRunOrder []string     // the order stepRuns was last written in
	queue        indentedList // stepQueue as last written
	artifacts    indentedList // artifacts as last written: it grows by a step's outputs
	track        runTracker
}

// indentedList is a list of strings indented at depth one as last written. A
// list that only grew since costs what was appended: artifacts collect every
// step's outputs, 10,000 paths at the end of a 5,000-step plan, and encoding
// them all again on every write cost more than the rest of it.
type indentedList struct {
	items []string
	open  []byte // "[" and the items, each on its line; the closing bracket is added
}

// write writes list indented at depth one ("[]" when empty).
func (l *indentedList) write(p *pieces, list []string) {
	if len(list) == 0 {
		p.cur.WriteString("[]")
		return
	}
	n := len(l.items)
	if l.open == nil || len(list) < n || !slices.Equal(list[:n], l.items) {
		// A new buffer: the old one may be a piece still being written.
		l.items, l.open, n = nil, []byte("["), 0
	}
	for i, item := range list[n:] {
		if n+i > 0 {
			l.open = append(l.open, ',')
		}
		l.open = append(l.open, "\n    "...)
		l.open = appendString(l.open, item)
	}
	l.items = append(l.items, list[n:]...)
	open := l.open[:len(l.open):len(l.open)] // appending to l.open later leaves it as it is
	if checkTracking {
		got := append(slices.Clip(open), listClose...)
		if want := indentAt(appendStrings(nil, list), 1); !bytes.Equal(got, want) {
			panic(fmt.Sprintf("planspec: a remembered list encoded as\n%s\nbut is\n%s", got, want))
		}
	}
	p.keep(open)
	p.cur.WriteString(listClose)
}

// listClose ends a non-empty list at depth one.
const listClose = "\n  ]"

type memoRun struct {
	run      StepRun
	raw      json.RawMessage
	indented []byte // raw at depth two, in the layout lines says; nil until needed
	lines    bool
}

func (m *encodeMemo) rememberPlan(s *State, raw json.RawMessage) {
	m.planSteps = nil
	if !m.frozen { // a frozen state's specs are told apart by identity alone
		m.planSteps = make(map[string]*StepSpec, len(s.Steps))
	}
	m.planPtrs = make(map[string]*StepSpec, len(s.Steps))
	for id, sp := range s.Steps {
		if sp != nil {
			if m.planSteps != nil {
				c := sp.copy()
				m.planSteps[id] = &c
			}
			m.planPtrs[id] = sp
		}
	}
	m.planRaw = raw
	m.planIndented = nil
	m.track.specs = false
}

// indentedPlan is the plan at depth one: indented, or with each step on a line
// of its own (lines; see oneLine).
func (m *encodeMemo) indentedPlan(lines bool) []byte {
	if m.planIndented == nil || m.planLines != lines {
		flat := maxDepth
		if lines {
			flat = 2 // plan, steps, a step
		}
		m.planIndented, m.planLines = indented(m.planRaw, 1, flat), lines
		// The indented plan is the plan as well: a plan encoded anew is then
		// held once, not also in the compact form it was encoded in.
		m.planRaw = m.planIndented
	}
	return m.planIndented
}

// indentedRun returns r encoded at depth two, indented or on one line (lines),
// from the memo when r is unchanged.
func (m *encodeMemo) indentedRun(id string, r *StepRun, lines bool) []byte {
	e := m.memoRun(id, r)
	if e.indented == nil || e.lines != lines {
		flat := maxDepth
		if lines {
			flat = 0
		}
		e.indented, e.lines = indented(e.raw, 2, flat), lines
	}
	return e.indented
}

// indentAt indents a JSON value to sit at the given depth of a two-space document.
func indentAt(raw json.RawMessage, depth int) []byte {
	return appendIndented(nil, raw, depth, maxDepth)
}

// maxDepth is deeper than any JSON stepseq reads: nothing is written compact.
const maxDepth = 1 << 30

func (m *encodeMemo) planUnchanged(s *State) bool {
	if m.planRaw == nil || len(m.planPtrs) != len(s.Steps) {
		return false
	}
	if m.track.on && !m.track.all && !m.track.specs {
		return true // steps are added, removed or replaced only before a TouchAll or through ReplaceSpec
	}
	if m.frozen {
		for id, sp := range s.Steps {
			if m.planPtrs[id] != sp {
				return false
			}
		}
		return true
	}
	for id, sp := range s.Steps {
		old, ok := m.planSteps[id]
		if !ok || sp == nil || !sp.equal(old) {
			return false
		}
	}
	return true
}

func (m *encodeMemo) rememberRun(id string, r *StepRun, raw json.RawMessage) {
	if m.runs == nil {
		m.runs = map[string]*memoRun{}
	}
	m.runs[id] = &memoRun{run: r.copy(), raw: raw}
}

// memoRun returns the remembered encoding of r, made again when r changed.
func (m *encodeMemo) memoRun(id string, r *StepRun) *memoRun {
	if old, ok := m.runs[id]; ok && r.equal(&old.run) {
		return old
	}
	raw, _ := r.object().MarshalJSON()
	m.rememberRun(id, r, raw)
	return m.runs[id]
}

func (sp *StepSpec) copy() StepSpec {
	c := *sp
	c.RequiredOutputs = slices.Clone(sp.RequiredOutputs)
	c.On = slices.Clone(sp.On)
	c.Agent = sp.Agent.Clone()
	c.AgentTemplate = sp.AgentTemplate.Clone()
	c.Fallback = slices.Clone(sp.Fallback)
	c.Result = slices.Clone(sp.Result)
	c.Graph = sp.Graph.Clone()
	c.Sandbox = sp.Sandbox.Clone()
	if sp.Retries != nil {
		n := *sp.Retries
		c.Retries = &n
	}
	if sp.Resume != nil {
		b := *sp.Resume
		c.Resume = &b
	}
	if sp.Approve != nil {
		a := *sp.Approve
		c.Approve = &a
	}
	return c
}

func (sp *StepSpec) equal(o *StepSpec) bool {
	return sp.sameText(o) && sp.sameGates(o) && sp.sameAgent(o) && sp.sameReports(o) && sp.Budget == o.Budget && sameObject(sp.raw, o.raw)
}

// sameText: what the step says, as given and as templates.
func (sp *StepSpec) sameText(o *StepSpec) bool {
	return sp.Title == o.Title && sp.Instruction == o.Instruction &&
		sp.InstructionTemplate == o.InstructionTemplate && sp.TitleTemplate == o.TitleTemplate
}

// sameGates: when the step runs, when it is done and what its end decides.
func (sp *StepSpec) sameGates(o *StepSpec) bool {
	return slices.Equal(sp.RequiredOutputs, o.RequiredOutputs) &&
		sp.When == o.When && sp.Skip == o.Skip && sp.Check == o.Check &&
		slices.Equal(sp.On, o.On) && sp.AwaitOutputs == o.AwaitOutputs &&
		sp.Exit == o.Exit && sp.Abort == o.Abort && sp.AbortReason == o.AbortReason && eqPtr(sp.Approve, o.Approve) && sp.Graph.Equal(o.Graph)
}

// sameAgent: who runs the step, how long, how often.
func (sp *StepSpec) sameAgent(o *StepSpec) bool {
	return sp.Agent.Equal(o.Agent) && slices.Equal(sp.Fallback, o.Fallback) && sp.AgentTemplate.Equal(o.AgentTemplate) &&
		sp.Timeout == o.Timeout && eqPtr(sp.Retries, o.Retries) && sp.LimitWait == o.LimitWait && eqPtr(sp.Resume, o.Resume) &&
		sp.Sandbox.Equal(o.Sandbox)
}

// sameReports: what the step's worker reports, and by when.
func (sp *StepSpec) sameReports(o *StepSpec) bool {
	return sp.Reports == o.Reports && sp.LaunchTimeout == o.LaunchTimeout &&
		sp.MilestoneTimeout == o.MilestoneTimeout && sp.IdleTimeout == o.IdleTimeout &&
		bytes.Equal(sp.Result, o.Result) && sp.OnInvalid == o.OnInvalid && sp.ResultFrom == o.ResultFrom
}

func (r *StepRun) copy() StepRun {
	c := *r
	if r.Stdout != nil {
		s := *r.Stdout
		c.Stdout = &s
	}
	if r.Error != nil {
		s := *r.Error
		c.Error = &s
	}
	if r.Agent != nil {
		a := *r.Agent
		a.Errors = slices.Clone(a.Errors)
		if a.Worktree != nil {
			w := *a.Worktree
			a.Worktree = &w
		}
		a.Usage = slices.Clone(a.Usage)
		c.Agent = &a
	}
	c.Reports = slices.Clone(r.Reports)
	c.Result = slices.Clone(r.Result)
	if r.Gate != nil {
		g := *r.Gate
		c.Gate = &g
	}
	c.Failed = slices.Clone(r.Failed)
	return c
}

func (r *StepRun) equal(o *StepRun) bool {
	return r.Status == o.Status && r.Tries == o.Tries && r.LastRunIso == o.LastRunIso &&
		eqPtr(r.Stdout, o.Stdout) && eqPtr(r.Error, o.Error) && r.Skipped == o.Skipped &&
		r.Phase == o.Phase && slices.EqualFunc(r.Reports, o.Reports, ReportRecord.equal) &&
		agentEqual(r.Agent, o.Agent) && bytes.Equal(r.Result, o.Result) && eqPtr(r.Gate, o.Gate) && sameObject(r.raw, o.raw) &&
		r.Foreach == o.Foreach && slices.Equal(r.Failed, o.Failed)
}

func eqPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// sameObject reports whether two raw objects hold the same members. Raw objects are
// replaced whole, never edited in place, so sharing the same backing arrays means
// equal; otherwise the members are compared.
func sameObject(a, b object) bool {
	if len(a.keys) == len(b.keys) && len(a.keys) > 0 && &a.keys[0] == &b.keys[0] && len(a.vals) == len(b.vals) {
		return true
	}
	return slices.Equal(a.keys, b.keys) && (len(a.vals) == 0 && len(b.vals) == 0 || sameMap(a.vals, b.vals))
}

func sameMap(a, b map[string]json.RawMessage) bool {
	return maps.EqualFunc(a, b, func(x, y json.RawMessage) bool { return string(x) == string(y) })
}

func (a ReportRecord) equal(b ReportRecord) bool {
	return a.Time == b.Time && a.Try == b.Try && a.Via == b.Via && a.Status == b.Status &&
		a.Summary == b.Summary && a.Evidence == b.Evidence && a.Risk == b.Risk && a.Next == b.Next &&
		slices.Equal(a.Artifacts, b.Artifacts) && bytes.Equal(a.Result, b.Result) && bytes.Equal(a.Usage, b.Usage)
}

// FreezeSpecs is the caller's word that, from now on, a step's spec in s.Steps is
// replaced (a new *StepSpec) and never edited in place: Marshal then tells an
// unchanged plan by the specs' identity, not by comparing every field of every
// step on every write. The reconcile core keeps that word; a caller that edits
// specs in place does not call it.
func (s *State) FreezeSpecs() { s.memo.freeze() }

// freeze drops the copies of the specs taken for comparing them, which a frozen
// state no longer needs: at 10,000 steps they are megabytes.
func (m *encodeMemo) freeze() {
	m.frozen = true
	m.planSteps = nil
}

func agentEqual(a, b *AgentRecord) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.StartedIso == b.StartedIso && a.FinishedIso == b.FinishedIso && a.Interruptions == b.Interruptions &&
		a.Granted == b.Granted && slices.Equal(a.Errors, b.Errors) && a.Session == b.Session && a.Limit == b.Limit &&
		eqPtr(a.Worktree, b.Worktree) && a.Spend == b.Spend && slices.EqualFunc(a.Usage, b.Usage, TryUsage.equal) &&
		a.EarlierTries == b.EarlierTries
}

func (u TryUsage) equal(o TryUsage) bool {
	return u.Try == o.Try && u.Agent == o.Agent && u.Unknown == o.Unknown && u.Model == o.Model &&
		u.InputTokens == o.InputTokens && u.OutputTokens == o.OutputTokens && u.CacheTokens == o.CacheTokens &&
		eqPtr(u.CostUSD, o.CostUSD)
}
