package planspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// Status words of a step run, and of the whole state (only IN_PROGRESS and DONE).
const (
	StatusPending    = "PENDING"
	StatusInProgress = "IN_PROGRESS"
	StatusDone       = "DONE"
	StatusFailed     = "FAILED"
)

// MaxStateSize caps what ParseState reads: a state file is a few kilobytes per step.
// stepseq never writes a state over it, and refuses at intake a plan whose fresh
// state is over MaxPlanState, leaving the rest for the runs the plan records.
const MaxStateSize = 64 << 20

// MaxPlanState caps the fresh state of a plan taken in: a quarter of MaxStateSize,
// so that its runs (each step's stdout, errors and reports) fit beside it.
const MaxPlanState = MaxStateSize / 4

// ErrInvalidState is matched by every error ParseState returns for content that is
// not a valid state file.
var ErrInvalidState = errors.New("planspec: invalid state")

// State is a state.json as the Agent Step Sequencer skill writes it. Keys it does not
// know, at every level, are kept verbatim and written back in place.
type State struct {
	Steps            map[string]*StepSpec // plan.steps
	StepQueue        []string
	CurrentStep      int
	StepRuns         map[string]*StepRun
	StepDelayMinutes float64
	Blockers         []string
	LastHeartbeatIso string
	Artifacts        []string
	Status           string
	// Settings are stepseq's plan-level additions, under the top-level "stepseq" key.
	Settings Settings

	raw     object
	planRaw object
	memo    encodeMemo
}

// StepSpec is one entry of plan.steps: the original's title, instruction and
// requiredOutputs, and stepseq's optional additions.
type StepSpec struct {
	Title           string
	Instruction     string
	RequiredOutputs []string
	When            string   // gate: launch only once true
	Skip            string   // true when the step comes up: DONE without a launch
	Check           string   // extra success test
	On              []string // globs whose changes re-run the step
	Timeout         Duration
	AwaitOutputs    Duration
	Retries         *int
	Agent           AgentSpec
	Fallback        []string
	// Reports is "required" or "optional"; "" takes the plan's.
	Reports          string
	LaunchTimeout    Duration // reports required: no accepted report this long fails the try
	MilestoneTimeout Duration // reports required: no report this long blocks the step
	IdleTimeout      Duration // no output and no report this long blocks the step
	// Result is the JSON Schema the done report's result must satisfy; OnInvalid
	// is retry (default) or abort.
	Result    json.RawMessage
	OnInvalid string
	// ResultFrom is where the result comes from when no done report gives one:
	// "output" (the agent's final message) or "file:PATH"; "": a
	// done report only.
	ResultFrom string
	// LimitWait bounds the wait for an agent's usage limit to reset;
	// 0 takes the plan's, else DefaultLimitWait. Resume, when set, says whether a
	// retry continues the agent's own session; nil takes the plan's.
	LimitWait Duration
	Resume    *bool
	// Sandbox is the step's sandbox: setting; nil takes the plan's.
	Sandbox *Sandbox
	// InstructionTemplate and TitleTemplate are the instruction and title as
	// the plan wrote them, with ${EXPR} in them: Instruction and
	// Title hold their rendering once a try starts.
	InstructionTemplate string
	TitleTemplate       string
	// AgentTemplate is the agent as the plan wrote it when an argument holds a
	// ${EXPR}: Agent holds its rendering once a try starts.
	AgentTemplate AgentSpec
	// Exit and Abort are checked once the step is verified: exit
	// leaves the step's loop (outside one, ends the plan DONE), abort blocks
	// the plan.
	Exit  string
	Abort string
	// Approve, when set, makes the step wait for a person's yes before its
	// first try.
	Approve *Approval
	// Graph are the step's place among steps that run side by side: what it
	// needs, its foreach, its worktree (see graph.go).
	Graph
	// AbortReason is the blocker's text when abort holds, a template
	// (abort: {when, reason}); "" says which abort held.
	AbortReason string
	// Budget bounds what this step may spend, beside the plan's budget.
	Budget Budget

	raw object
}

// StepRun is one entry of stepRuns.
type StepRun struct {
	Status     string
	Tries      int
	LastRunIso string
	Stdout     *string
	Error      *string
	Skipped    bool
	// Phase is where the try stands in the workflow protocol; "" for a
	// record the original wrote, read as its status says.
	Phase string
	// Reports are the accepted worker reports of the step, the newest last, at
	// most MaxReportsKept.
	Reports []ReportRecord
	// Result is the accepted result of the step's last done report.
	Result json.RawMessage
	// Agent is stepseq's record of the current try (under the run's "stepseq" key):
	// a try started but never finished was interrupted.
	Agent *AgentRecord
	// Gate is the person's yes the step waits for, or was given (approve).
	Gate *Gate
	// Foreach marks a foreach step's record: its Result is the list of its
	// instances' results. Failed are the instances (or the step itself) that
	// failed for good while continueOnFailure let the rest go on.
	Foreach bool
	Failed  []string

	raw object
}

// AgentRecord is when a try started and finished, and how many times the step was
// interrupted. The running agent's pid lives in the workspace lock, not here: no
// process outlives the machine, so it need not be durable.
type AgentRecord struct {
	StartedIso string `json:"startedIso,omitempty"`
	// FinishedIso is left out of a finished run's record when it is the run's
	// lastRunIso, and read back from it.
	FinishedIso   string `json:"finishedIso,omitempty"`
	Interruptions int    `json:"interruptions,omitempty"`
	// Granted counts the tries `stepseq retry` added beyond the retry limit.
	Granted int `json:"granted,omitempty"`
	// Errors are the failed tries' errors, the newest last, at most
	// MaxTryErrorsKept: `error` holds only the last.
	Errors []TryError `json:"errors,omitempty"`
	// Session is the agent's own session, as its output named it: a retry with
	// resume: true continues it.
	Session AgentSession `json:"session,omitzero"`
	// Limit is the usage limit the step waits out; zero when none holds it.
	Limit LimitHold `json:"limit,omitzero"`
	// Worktree is the step's branch once its verified work is committed on
	// it (worktree: true).
	Worktree *WorktreeRecord `json:"worktree,omitempty"`
	// Spend is what the step's tries spent, every try of the run counted:
	// a re-run of the step keeps it. Usage is the newest tries' own figures,
	// at most MaxUsageKept.
	Spend Spend      `json:"spend,omitzero"`
	Usage []TryUsage `json:"usage,omitempty"`
	// EarlierTries are the tries of the step's run before this one (a re-run,
	// a loop's next round), whose logs this run's first try sets aside as a
	// run: its tries count even when they printed nothing and left no log.
	EarlierTries int `json:"earlierTries,omitempty"`
}

// WorktreeRecord is a worktree step's branch: the commit its verified work
// made, and whether the branch was merged at its join.
type WorktreeRecord struct {
	Branch string `json:"branch"`
	Commit string `json:"commit,omitempty"`
	Merged bool   `json:"merged,omitempty"`
}

// AgentSession is the session an agent CLI said it ran the try in.
type AgentSession struct {
	Agent string `json:"agent"` // the preset's name
	ID    string `json:"id"`
}

// LimitHold is a usage limit that holds a step: every agent of its
// try said it is out of quota. The same try runs again at UntilIso.
type LimitHold struct {
	SinceIso string `json:"sinceIso"` // when the first limited answer came
	UntilIso string `json:"untilIso"` // when the try runs again
	// Stated: the agent named the reset time; otherwise UntilIso is a backoff.
	Stated bool   `json:"stated,omitempty"`
	Waits  int    `json:"waits"` // limited answers in a row
	Agent  string `json:"agent"`
	Error  string `json:"error"` // the agent's words
}

// DefaultLimitWait bounds the wait for a usage limit when neither the step nor
// the plan sets limitWait.
const DefaultLimitWait = Duration(12 * time.Hour)

// TryError is the error one failed try ended with.
type TryError struct {
	Try   int    `json:"try"`
	Error string `json:"error"`
}

// MaxAppliedKept bounds Settings.Applied: a command waits for its holder
// far fewer commands than this.
const MaxAppliedKept = 64

// MaxTryErrorsKept bounds AgentRecord.Errors.
const MaxTryErrorsKept = 10

// Settings are the plan-level settings stepseq adds under the top-level "stepseq" key.
type Settings struct {
	Name       string
	Agent      AgentSpec
	Fallback   []string
	MaxRetries *int
	Timeout    Duration
	Vars       map[string]any
	// Params are the run's params, checked against the plan's.
	Params map[string]any
	// Summary are the plan's summary expressions by name, SummaryValues what
	// they gave when the plan last ended (done or blocked).
	Summary       map[string]string
	SummaryValues map[string]any
	// Reports, LaunchTimeout, MilestoneTimeout and IdleTimeout are the plan's
	// defaults for its steps.
	Reports          string
	LaunchTimeout    Duration
	MilestoneTimeout Duration
	IdleTimeout      Duration
	// Heartbeat is how often the user hears from a step in progress with nothing
	// new; 0: the default.
	Heartbeat Duration
	// LimitWait and Resume are the plan's defaults for its steps.
	LimitWait Duration
	Resume    bool
	// MaxParallel bounds the run's agents at once; 0: no bound of the plan's.
	MaxParallel int
	// Sandbox is the plan's sandbox: setting, its steps' default; nil: none.
	Sandbox *Sandbox
	// Notify are the plan's notification sinks.
	Notify []NotifySink
	// Groups are the plan's repeat groups, Loops where each stands.
	Groups []Group
	Loops  map[string]*Loop
	Source string // plan file the state came from, relative to the workspace
	Hash   string // content hash of that plan file
	// RunID is the run's id, "NAME:nonce": a state file whose id names
	// another run is a copy of that run (a backup), not a run of its own.
	RunID string
	// Face is the face the run's plan arrived through ("mcp": plan_submit,
	// run_start); "" for a plan of the workspace's and a state written by hand.
	// Such a run's env() reads only the names the operator exposes
	// (--expose-env), on every restart.
	Face string
	// Approval, when set, makes the plan wait for a person's yes before its
	// first step; Gate is where that yes stands.
	Approval *Approval
	Gate     *Gate
	// Budget bounds what the run may spend; Spend is what it spent so far.
	// BudgetHeld is the figure of the bound that holds the run, as it was
	// told: a restart that finds it tells it no more.
	Budget     Budget
	Spend      Spend
	BudgetHeld string
	// Prices give a cost to the tries of agents that name none.
	Prices map[string]Price
	// Applied are the ids of the commands last applied to the run (a
	// trigger's ID), oldest first, at most MaxAppliedKept: a command given
	// again with an id listed here was applied already and is not again.
	Applied []string

	raw object
}

// Clone is a copy of s that shares nothing mutable with it, but the keys of
// stepseq's record that it does not know (raw), which are never changed.
func (s Settings) Clone() Settings {
	c := s
	c.Agent = s.Agent.Clone()
	c.Fallback = slices.Clone(s.Fallback)
	if s.MaxRetries != nil {
		n := *s.MaxRetries
		c.MaxRetries = &n
	}
	c.Vars = maps.Clone(s.Vars)
	c.Params = maps.Clone(s.Params)
	c.Summary = maps.Clone(s.Summary)
	c.SummaryValues = maps.Clone(s.SummaryValues)
	c.Notify = slices.Clone(s.Notify)
	c.Groups = cloneGroups(s.Groups)
	c.Loops = cloneLoops(s.Loops)
	if s.Approval != nil {
		a := *s.Approval
		c.Approval = &a
	}
	if s.Gate != nil {
		g := *s.Gate
		c.Gate = &g
	}
	c.Sandbox = s.Sandbox.Clone()
	c.Prices = maps.Clone(s.Prices)
	c.Applied = slices.Clone(s.Applied)
	return c
}

// NewState returns an empty, runnable state.
func NewState() *State {
	return &State{
		Steps:     map[string]*StepSpec{},
		StepQueue: []string{},
		StepRuns:  map[string]*StepRun{},
		Blockers:  []string{},
		Artifacts: []string{},
		Status:    StatusInProgress,
	}
}

// Run returns the run record of step id, creating a PENDING one when there is none.
// On a tracked state (Track) the record counts as changed.
func (s *State) Run(id string) *StepRun {
	if s.StepRuns == nil {
		s.StepRuns = map[string]*StepRun{}
	}
	s.Touch(id)
	r, ok := s.StepRuns[id]
	if !ok || r == nil {
		r = &StepRun{Status: StatusPending}
		s.StepRuns[id] = r
	}
	return r
}

// StateError is a problem with one key of a state file.
type StateError struct {
	File string
	Key  string // dotted path, e.g. stepRuns.build.tries
	Msg  string
}

func (e *StateError) Error() string {
	switch {
	case e.File == "" && e.Key == "":
		return e.Msg
	case e.File == "":
		return fmt.Sprintf("%s: %s", e.Key, e.Msg)
	case e.Key == "":
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", e.File, e.Key, e.Msg)
}

func (e *StateError) Unwrap() error { return ErrInvalidState }

// StateErrors is every problem found in one state file.
type StateErrors []*StateError

func (es StateErrors) Error() string {
	var b bytes.Buffer
	for i, e := range es {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

func (es StateErrors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// ParseState reads a state file. name is used in messages. It rejects what the
// original could not run (wrong types, a queued id with no step, NaN) and reports
// every problem, each naming the key and what would be right.
func ParseState(r io.Reader, name string) (*State, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxStateSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return ParseStateBytes(data, name)
}

// ParseStateBytes is ParseState of content already read, which the state keeps:
// data must not change afterwards.
func ParseStateBytes(data []byte, name string) (*State, error) {
	return parseState(data, name, false)
}

// ReadStateBytes is ParseStateBytes for a caller that will not write the state
// back, such as a report: it skips remembering how the plan and the runs were
// encoded, a copy of every step that only speeds up a later write. Written all the
// same, the state is encoded in full.
func ReadStateBytes(data []byte, name string) (*State, error) {
	return parseState(data, name, true)
}

func parseState(data []byte, name string, readOnly bool) (*State, error) {
	if len(data) > MaxStateSize {
		return nil, &StateError{File: name, Msg: fmt.Sprintf("larger than %d MiB: not a state file", MaxStateSize>>20)}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &StateError{File: name, Msg: "empty file: want a JSON object"}
	}
	spans, ok := indexJSON(data)
	if !ok {
		var v any
		err := json.Unmarshal(data, &v)
		at := ""
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			line, col := LineCol(data, int(min(max(syn.Offset-1, 0), int64(len(data)))))
			at = fmt.Sprintf(" at line %d, column %d", line, col)
		}
		msg := fmt.Sprintf("not valid JSON%s (%v)", at, err)
		if bytes.Contains(data, []byte("NaN")) || bytes.Contains(data, []byte("Infinity")) {
			msg += "; NaN and Infinity are not JSON"
		}
		return nil, &StateError{File: name, Msg: msg}
	}
	d := &stateDecoder{file: name, readOnly: readOnly, spans: spans}
	st := d.state(data)
	if len(d.errs) > 0 {
		return nil, d.errs
	}
	return st, nil
}

// Marshal encodes the state as the original writes it, with two-space
// indentation; a large plan's steps and runs one a line (see oneLine).
func (s *State) Marshal() []byte { return s.AppendMarshal(nil) }

// AppendMarshal is Marshal appending to dst.
func (s *State) AppendMarshal(dst []byte) []byte {
	for _, piece := range s.MarshalPieces() {
		dst = append(dst, piece...)
	}
	return dst
}

// MarshalPieces is Marshal in pieces, in order: the sections remembered from
// earlier encodings (the plan, the runs that stood, the queue, the artifacts)
// as they are, the rest in small buffers of their own. A writer hands them to
// the file one by one: at 5,000 steps, copying them into one buffer cost more
// than everything else a write does. No piece is changed afterwards, by this
// state or any other.
func (s *State) MarshalPieces() [][]byte {
	o := s.raw
	o.keys = slices.Clone(o.keys)
	o.vals = maps.Clone(o.vals)

	if s.memo.planUnchanged(s) {
		o.setRaw("plan", s.memo.planRaw)
	} else {
		plan := s.planRaw
		plan.keys = slices.Clone(plan.keys)
		plan.vals = maps.Clone(plan.vals)
		steps := object{vals: map[string]json.RawMessage{}}
		for _, id := range s.StepOrder() {
			steps.set(id, s.Steps[id].object())
		}
		plan.set("steps", steps)
		o.set("plan", plan)
		s.memo.rememberPlan(s, o.vals["plan"])
	}
	o.setRaw("stepQueue", nil) // written from the memo's indented queue below
	o.set("currentStep", s.CurrentStep)
	o.setRaw("stepRuns", nil) // written from the memo's indented runs below
	o.set("stepDelayMinutes", s.StepDelayMinutes)
	o.setRaw("blockers", appendStrings(nil, s.Blockers))
	if s.LastHeartbeatIso != "" || o.has("lastHeartbeatIso") {
		o.set("lastHeartbeatIso", s.LastHeartbeatIso)
	}
	o.setRaw("artifacts", nil) // written from the memo's indented list below
	o.set("status", s.Status)
	if so := s.Settings.object(); len(so.keys) > 0 { // encoded once: a loop's rounds are most of it
		o.set("stepseq", so)
	} else {
		o.del("stepseq")
	}

	// Written member by member, the plan and the runs from their remembered indented
	// form: re-indenting the whole file after every step would cost more than the
	// rest of the write.
	var p pieces
	out := &p.cur
	out.WriteString("{")
	for i, k := range o.keys {
		if i > 0 {
			out.WriteByte(',')
		}
		out.WriteString("\n  ")
		out.Write(appendString(nil, k))
		out.WriteString(": ")
		switch k {
		case "plan":
			p.keep(s.memo.indentedPlan(s.oneLine()))
		case "stepRuns":
			s.writeRuns(&p)
		case "stepQueue":
			s.memo.queue.write(&p, s.StepQueue)
		case "artifacts":
			s.memo.artifacts.write(&p, s.Artifacts)
		default:
			out.Write(appendIndented(out.AvailableBuffer(), o.vals[k], 1, maxDepth))
		}
	}
	out.WriteString("\n}\n")
	p.flush()
	return p.list
}

// writeRuns writes stepRuns at depth one.
func (s *State) writeRuns(p *pieces) {
	if !s.memo.track.on {
		s.writeRunsFull(&p.cur, s.runOrder())
		return
	}
	head, tail := s.trackedRuns()
	if checkTracking {
		s.checkTracked(head, tail)
	}
	p.keep(head)
	p.cur.Write(tail)
}

// pieces collects an encoding: the remembered sections kept as they are, and
// what is encoded anew in buffers of its own, never reused.
type pieces struct {
	list [][]byte
	cur  bytes.Buffer // the piece being written
}

// keepMin is the size below which a remembered section is copied rather
// than kept: a write call per small piece would cost more than the copy.
// Tests lower it to keep every section.
var keepMin = 16 << 10

// keep adds b, which never changes, as a piece of its own.
func (p *pieces) keep(b []byte) {
	if len(b) < keepMin {
		p.cur.Write(b)
		return
	}
	p.flush()
	p.list = append(p.list, b)
}

func (p *pieces) flush() {
	if p.cur.Len() > 0 {
		p.list = append(p.list, p.cur.Bytes())
		p.cur = bytes.Buffer{}
	}
}

// writeRunsFull writes stepRuns at depth one in the order given, each run from the
// memo when it is equal to the one last encoded.
func (s *State) writeRunsFull(out *bytes.Buffer, ids []string) {
	if len(ids) == 0 {
		out.WriteString("{}")
		return
	}
	for i, id := range ids {
		out.Write(s.appendRun(out.AvailableBuffer(), i, id))
	}
	out.WriteString(runsClose)
}

// Clone returns a deep copy, through the file format, so that no change to the copy
// reaches the original. A tracked state is encoded whole, so that what it was told
// changed still stands for its next write (Touched).
func (s *State) Clone() *State {
	on := s.memo.track.on
	s.memo.track.on = false
	data := s.Marshal()
	s.memo.track.on = on
	c, err := ParseState(bytes.NewReader(data), "clone")
	if err != nil {
		panic(fmt.Sprintf("planspec: state does not survive its own encoding: %v", err))
	}
	return c
}

// StepOrder lists plan.steps ids: those already in the file first, in file order,
// then the queue's order, then the rest sorted.
func (s *State) StepOrder() []string {
	return orderKeys(s.planStepsOrder(), s.StepQueue, maps.Keys(s.Steps), func(id string) bool {
		return s.Steps[id] != nil
	})
}

func (s *State) runOrder() []string {
	last := s.memo.lastRunOrder
	kept := func() bool { return !slices.ContainsFunc(last, func(id string) bool { return s.StepRuns[id] == nil }) }
	if len(last) == len(s.StepRuns) && kept() {
		return last // the same runs as last time: the same order
	}
	// A chain adds one run a step, the one at the cursor: it goes last.
	if s.CurrentStep < len(s.StepQueue) && len(last) > 0 && len(last)+1 == len(s.StepRuns) {
		id := s.StepQueue[s.CurrentStep]
		if s.StepRuns[id] != nil && !slices.Contains(last, id) && kept() {
			s.memo.lastRunOrder = append(slices.Clip(last), id)
			return s.memo.lastRunOrder
		}
	}
	order := orderKeys(s.memo.runOrder, s.StepQueue, maps.Keys(s.StepRuns), func(id string) bool {
		return s.StepRuns[id] != nil
	})
	s.memo.lastRunOrder = order
	return order
}

func (s *State) planStepsOrder() []string { return s.memo.stepsOrder }

// orderKeys lists the ids keep accepts: first's, then second's, then the rest of
// all (the keys of a map), sorted. Only the rest is sorted, and it is usually
// empty: the file's order and the queue name every key.
func orderKeys(first, second []string, all func(yield func(string) bool), keep func(string) bool) []string {
	seen := map[string]bool{}
	var out []string
	for _, list := range [][]string{first, second} {
		for _, id := range list {
			if !seen[id] && keep(id) {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	var rest []string
	for id := range all {
		if !seen[id] && keep(id) {
			rest = append(rest, id)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}

func (sp *StepSpec) object() object {
	o := sp.raw
	o.keys = slices.Clone(o.keys)
	o.vals = maps.Clone(o.vals)
	o.set("title", sp.Title)
	o.set("instruction", sp.Instruction)
	outputsKey := "requiredOutputs" // or the spelling the step was read with
	if !o.has(outputsKey) && o.has("required_outputs") {
		outputsKey = "required_outputs"
	}
	setOrDel(&o, outputsKey, sp.RequiredOutputs, len(sp.RequiredOutputs) > 0 || o.has(outputsKey))
	setOrDel(&o, "when", sp.When, sp.When != "")
	setOrDel(&o, "skip", sp.Skip, sp.Skip != "")
	setOrDel(&o, "check", sp.Check, sp.Check != "")
	setOrDel(&o, "on", sp.On, len(sp.On) > 0)
	setOrDel(&o, "timeout", sp.Timeout, sp.Timeout > 0)
	setOrDel(&o, "awaitOutputs", sp.AwaitOutputs, sp.AwaitOutputs > 0)
	setOrDel(&o, "retries", sp.Retries, sp.Retries != nil)
	setOrDel(&o, "agent", sp.Agent, !sp.Agent.IsZero())
	setOrDel(&o, "fallback", sp.Fallback, len(sp.Fallback) > 0)
	setOrDel(&o, "reports", sp.Reports, sp.Reports != "")
	setOrDel(&o, "launchTimeout", sp.LaunchTimeout, sp.LaunchTimeout > 0)
	setOrDel(&o, "milestoneTimeout", sp.MilestoneTimeout, sp.MilestoneTimeout > 0)
	setOrDel(&o, "idleTimeout", sp.IdleTimeout, sp.IdleTimeout > 0)
	setOrDel(&o, "result", sp.Result, len(sp.Result) > 0)
	setOrDel(&o, "onInvalid", sp.OnInvalid, sp.OnInvalid != "")
	setOrDel(&o, "resultFrom", sp.ResultFrom, sp.ResultFrom != "")
	setOrDel(&o, "limitWait", sp.LimitWait, sp.LimitWait > 0)
	setOrDel(&o, "resume", sp.Resume, sp.Resume != nil)
	setOrDel(&o, "sandbox", sp.Sandbox, sp.Sandbox != nil)
	setOrDel(&o, "instructionTemplate", sp.InstructionTemplate, sp.InstructionTemplate != "")
	setOrDel(&o, "titleTemplate", sp.TitleTemplate, sp.TitleTemplate != "")
	setOrDel(&o, "agentTemplate", sp.AgentTemplate, !sp.AgentTemplate.IsZero())
	setOrDel(&o, "exit", sp.Exit, sp.Exit != "")
	setOrDel(&o, "abort", sp.Abort, sp.Abort != "")
	if sp.Approve != nil {
		o.set("approve", approvalJSON(sp.Approve, true))
	} else {
		o.del("approve")
	}
	sp.Graph.set(&o)
	setOrDel(&o, "abortReason", sp.AbortReason, sp.AbortReason != "")
	setOrDel(&o, "budget", sp.Budget, !sp.Budget.IsZero())
	return o
}

func (r *StepRun) object() object {
	o := r.raw
	o.keys = slices.Clone(o.keys)
	o.vals = maps.Clone(o.vals)
	o.set("status", r.Status)
	o.set("tries", r.Tries)
	setOrDel(&o, "lastRunIso", r.LastRunIso, r.LastRunIso != "")
	setOrDel(&o, "stdout", r.Stdout, r.Stdout != nil)
	setOrDel(&o, "error", r.Error, r.Error != nil)
	setOrDel(&o, "skipped", r.Skipped, r.Skipped)
	setOrDel(&o, "phase", r.Phase, r.Phase != "")
	setOrDel(&o, "reports", r.Reports, len(r.Reports) > 0)
	setOrDel(&o, "result", r.Result, len(r.Result) > 0)
	setOrDel(&o, "stepseq", r.agentWritten(), r.Agent != nil)
	setOrDel(&o, "approval", r.Gate, r.Gate != nil)
	setOrDel(&o, "foreach", r.Foreach, r.Foreach)
	setOrDel(&o, "failed", r.Failed, len(r.Failed) > 0)
	return o
}

// agentWritten is stepseq's record of the try as written: without finishedIso
// when the run is finished and its lastRunIso says when, as a try that ends
// records it (impliedByRecord reads it back). At 50,000 steps that is a sixth
// of the file.
func (r *StepRun) agentWritten() *AgentRecord {
	if r.Agent == nil || r.Agent.FinishedIso == "" || r.Agent.FinishedIso != r.LastRunIso || !r.finished() {
		return r.Agent
	}
	a := *r.Agent
	a.FinishedIso = ""
	return &a
}

func (r *StepRun) finished() bool { return r.Status == StatusDone || r.Status == StatusFailed }

// impliedByRecord fills in what a finished run's record was written without
// (see agentWritten): when its try finished.
func (r *StepRun) impliedByRecord() {
	if r.Agent != nil && r.Agent.FinishedIso == "" && r.finished() {
		r.Agent.FinishedIso = r.LastRunIso
	}
}

func (st *Settings) object() object {
	o := st.raw
	o.keys = slices.Clone(o.keys)
	o.vals = maps.Clone(o.vals)
	setOrDel(&o, "name", st.Name, st.Name != "")
	setOrDel(&o, "agent", st.Agent, !st.Agent.IsZero())
	setOrDel(&o, "fallback", st.Fallback, len(st.Fallback) > 0)
	setOrDel(&o, "maxRetries", st.MaxRetries, st.MaxRetries != nil)
	setOrDel(&o, "timeout", st.Timeout, st.Timeout > 0)
	setOrDel(&o, "vars", st.Vars, len(st.Vars) > 0)
	setOrDel(&o, "params", st.Params, len(st.Params) > 0)
	setOrDel(&o, "summary", st.Summary, len(st.Summary) > 0)
	setOrDel(&o, "summaryValues", st.SummaryValues, st.SummaryValues != nil)
	setOrDel(&o, "reports", st.Reports, st.Reports != "")
	setOrDel(&o, "launchTimeout", st.LaunchTimeout, st.LaunchTimeout > 0)
	setOrDel(&o, "milestoneTimeout", st.MilestoneTimeout, st.MilestoneTimeout > 0)
	setOrDel(&o, "idleTimeout", st.IdleTimeout, st.IdleTimeout > 0)
	setOrDel(&o, "heartbeat", st.Heartbeat, st.Heartbeat > 0)
	setOrDel(&o, "limitWait", st.LimitWait, st.LimitWait > 0)
	setOrDel(&o, "resume", st.Resume, st.Resume)
	setOrDel(&o, "maxParallel", st.MaxParallel, st.MaxParallel > 0)
	setOrDel(&o, "sandbox", st.Sandbox, st.Sandbox != nil)
	setOrDel(&o, "notify", st.Notify, len(st.Notify) > 0)
	setOrDel(&o, "groups", st.Groups, len(st.Groups) > 0)
	setOrDel(&o, "loops", st.Loops, len(st.Loops) > 0)
	setOrDel(&o, "source", st.Source, st.Source != "")
	setOrDel(&o, "hash", st.Hash, st.Hash != "")
	setOrDel(&o, "runId", st.RunID, st.RunID != "")
	setOrDel(&o, "face", st.Face, st.Face != "")
	if st.Approval != nil {
		o.set("approval", approvalJSON(st.Approval, ApprovalRequired))
	} else {
		o.del("approval")
	}
	setOrDel(&o, "gate", st.Gate, st.Gate != nil)
	setOrDel(&o, "budget", st.Budget, !st.Budget.IsZero())
	setOrDel(&o, "spend", st.Spend, !st.Spend.IsZero())
	setOrDel(&o, "budgetHeld", st.BudgetHeld, st.BudgetHeld != "")
	setOrDel(&o, "prices", st.Prices, len(st.Prices) > 0)
	setOrDel(&o, "applied", st.Applied, len(st.Applied) > 0)
	return o
}

func setOrDel(o *object, key string, v any, present bool) {
	if present {
		o.set(key, v)
	} else {
		o.del(key)
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Duration is a time span written as Go and YAML plans write it: "90s", "2m", "1h".
type Duration time.Duration

// MarshalJSON writes the shortest exact form: 2m rather than 2m0s.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

func (d Duration) String() string {
	td := time.Duration(d)
	switch {
	case td == 0:
		return "0s"
	case td%time.Hour == 0:
		return fmt.Sprintf("%dh", td/time.Hour)
	case td%time.Minute == 0:
		return fmt.Sprintf("%dm", td/time.Minute)
	case td%time.Second == 0:
		return fmt.Sprintf("%ds", td/time.Second)
	}
	return td.String()
}

// MaxDuration is the longest span a plan or a state may give (a delay, a timeout,
// a wait): 365 days. A longer one in a plan is refused with this bound named;
// stepDelayMinutes, the original's plain number, is clamped to it. Without the
// bound, 1e9 minutes overflows time.Duration and reads as no delay at all.
const MaxDuration = Duration(365 * 24 * time.Hour)

// maxDurationText names MaxDuration in messages.
const maxDurationText = "8760h (365 days)"

// ParseDuration reads "90s", "2m", "1h30m". It refuses negative spans and spans
// longer than MaxDuration.
func ParseDuration(s string) (Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		if durationSyntax().MatchString(s) { // well formed: it overflows time.Duration
			return 0, fmt.Errorf("bad duration %q: longer than the longest span stepseq takes, %s", s, maxDurationText)
		}
		return 0, fmt.Errorf("bad duration %q: want a number with a unit, like 90s, 2m or 1h", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("bad duration %q: must not be negative", s)
	}
	if Duration(d) > MaxDuration {
		return 0, fmt.Errorf("bad duration %q: longer than the longest span stepseq takes, %s", s, maxDurationText)
	}
	return Duration(d), nil
}

// durationSyntax is compiled on first use: every stepseq command links planspec.
var durationSyntax = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(DurationPattern) })

// StepDelay is stepDelayMinutes as a span, clamped to MaxDuration; clamped says it
// was, for the reason a delayed step gives.
func (s *State) StepDelay() (d time.Duration, clamped bool) {
	if !(s.StepDelayMinutes > 0) { // also NaN
		return 0, false
	}
	if s.StepDelayMinutes >= float64(MaxDuration)/float64(time.Minute) {
		return time.Duration(MaxDuration), s.StepDelayMinutes > float64(MaxDuration)/float64(time.Minute)
	}
	return time.Duration(s.StepDelayMinutes * float64(time.Minute)), false
}

// StepDelayReason says what delays a step: the stepDelayMinutes, and the clamp
// when there was one.
func (s *State) StepDelayReason() string {
	if _, clamped := s.StepDelay(); clamped {
		return fmt.Sprintf("stepDelayMinutes %g, clamped to %g minutes (365 days), the longest delay stepseq takes",
			s.StepDelayMinutes, float64(MaxDuration)/float64(time.Minute))
	}
	return fmt.Sprintf("stepDelayMinutes %g", s.StepDelayMinutes)
}

// IsoLayout is how the original writes times: UTC, microseconds, explicit offset.
const IsoLayout = "2006-01-02T15:04:05.000000+00:00"

// FormatISO writes t as the original does: 2026-02-10T21:30:31.123456+00:00.
func FormatISO(t time.Time) string { return t.UTC().Format(IsoLayout) }

// ParseISO reads any ISO 8601 time the original or an agent may write. A time
// without an offset is taken as UTC, as Python's naive datetimes are in practice.
func ParseISO(s string) (time.Time, error) {
	for _, layout := range []string{
		time.RFC3339Nano,
		"2006-01-02T15:04:05.999999999Z0700",
		"2006-01-02T15:04:05.999999999",
		"2006-01-02 15:04:05.999999999Z07:00",
		"2006-01-02 15:04:05.999999999",
		"2006-01-02T15:04Z07:00",
		"2006-01-02T15:04",
		"2006-01-02",
	} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("bad time %q: want ISO 8601, like 2026-02-10T21:30:31.123456+00:00", s)
}

// DurationPattern is what ParseDuration accepts, as a JSON Schema pattern:
// "90s", "2m", "1h30m", "1.5h", "0s" (no sign: negative spans are refused).
const DurationPattern = `^\+?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`

// CopyOf is the run whose state this is a copy of, when the state, read from
// run name's file, carries another run's id ("" when it is name's own, or
// carries no id, as a state from before run ids or by hand does).
func (st *State) CopyOf(name string) string {
	owner, _, ok := strings.Cut(st.Settings.RunID, ":")
	if !ok || owner == name {
		return ""
	}
	return owner
}
