package core

import (
	"encoding/json"
	"log/slog"
	"slices"
	"time"

	"github.com/stepseq/stepseq/planspec"
	planpkg "github.com/stepseq/stepseq/planspec/plan"
)

// The reconcile core as one state machine, after etcd's raft: it takes one input at
// a time and hands back what must be done as effects. It does no I/O and reads no
// clock: the time comes with each input, and what it must know of the workspace it
// asks a Probe. `check` and `step` drive it until it settles; `watch` drives it from
// its event loop. Every rule of the contract and of the workflow protocol lives here
// once.

// Input is what a driver feeds the machine.
type Input interface{ isInput() }

// StateRead is the state file as the driver just read it. Err is fs.ErrNotExist for
// a missing file, or why it does not parse; Unchanged means it holds what this
// process last read or wrote.
type StateRead struct {
	State     *planspec.State
	Err       error
	Unchanged bool
}

// FilesChanged are workspace paths (slash-separated, relative) that changed.
type FilesChanged struct {
	Paths  []string
	Rescan bool
}

// AgentExited is the end of a try's agent. AgentFailed is the agent's own word
// that the try failed whatever its exit code (a preset's reading of its output).
type AgentExited struct {
	Step        string
	Try         int
	Exit        Exit
	AgentFailed string
	// Limits, when the try's last agent was out of quota, are what every
	// limited agent of the try said: the same try waits and runs
	// again instead of failing.
	Limits []Limit
	// Session is the session the agent's output named, for resume: true.
	Session planspec.AgentSession
	// Result is the result read from the agent's final message, for a step
	// with resultFrom: output; ResultErr says why none was read.
	Result    json.RawMessage
	ResultErr string
	// Refused names what the agent CLI's own permissions refused during the
	// try (claude's permission_denials); a failed try's error ends with it,
	// since the CLI itself reports success.
	Refused string
	// Usage is what the try spent, as its agent's output said (nil: it said
	// nothing); UsageErr says why a usage it printed does not read, and Agent
	// names the agent for the record.
	Usage    *planspec.Usage
	UsageErr string
	Agent    string
}

// ReportIn is a worker's report through any channel. Try 0 means the current try.
// Ref names it for the verdict: a file path, or a caller's token.
type ReportIn struct {
	Step   string
	Try    int
	Report planspec.WorkerReport
	Via    string // file, cli, mcp
	Ref    string
	// Written is when a dropped file was last modified: a file older than the
	// current try belongs to an earlier one.
	Written time.Time
}

// TimerFired says the time the machine asked for with SetTimer has come.
type TimerFired struct{}

// TriggersIn are queued triggers: re-runs, retries and handed-over checks.
type TriggersIn struct{ Triggers []Trigger }

// PlanEdited is a valid edit of the active plan's file.
type PlanEdited struct {
	Plan *planpkg.Plan
	Hash string
}

// Written is the outcome of the last WriteState.
type Written struct{ Err error }

// InheritedGone says an agent a previous stepseq left has ended.
type InheritedGone struct{}

// RunCurrent is the runner's order (`stepseq step`): run the step at the cursor
// whatever its status, after its delay.
type RunCurrent struct{}

// PlanApplied is a plan the driver took in (a file in plans/, a plan handed
// over): its state replaces the one held and goes to disk through WriteState,
// as every change of the state does, so that a write that fails stops the
// launching and is retried like any other.
type PlanApplied struct {
	State  *planspec.State
	Source string // the plan file, for the write's journal entry
}

// Shutdown stops launching; a running agent is stopped and its step stays
// IN_PROGRESS, to be retried on the next start without spending a try.
type Shutdown struct{}

func (StateRead) isInput()     {}
func (FilesChanged) isInput()  {}
func (AgentExited) isInput()   {}
func (ReportIn) isInput()      {}
func (TimerFired) isInput()    {}
func (TriggersIn) isInput()    {}
func (PlanEdited) isInput()    {}
func (Written) isInput()       {}
func (InheritedGone) isInput() {}
func (RunCurrent) isInput()    {}
func (Shutdown) isInput()      {}
func (PlanApplied) isInput()   {}

// Effect is what the machine asks its driver to do, in order.
type Effect interface{ isEffect() }

// WriteState asks for the state to be written; the driver answers with Written.
type WriteState struct {
	State  *planspec.State
	Reason string
}

// ReadState asks for the state file to be read again; the driver answers with
// StateRead.
type ReadState struct{}

// StartAgent starts the try's agent; BeginTry is already recorded on disk.
type StartAgent struct {
	Step   string
	Try    int
	Prompt string
	// Changed are the paths whose change started this run (on:, a trigger, a gate).
	Changed []string
	// Resumed is an interrupted try started again: its output goes on in the try's
	// log. Any other start is a new try, whose log is its own: a log of the same
	// number left by an earlier run of the step (a re-run counts from 1) is set
	// aside first.
	Resumed bool
	// Resume is the agent session a retry with resume: true continues; zero: a
	// fresh start.
	Resume planspec.AgentSession
	// Sandbox is the sandbox the agent runs in; nil: it runs bare.
	Sandbox *planspec.Sandbox
}

// StopAgent ends the running try's agent group (SIGTERM, grace, SIGKILL).
type StopAgent struct {
	Step   string
	Try    int
	Reason string
}

// Notify is one transition for the user.
type Notify struct{ Note Notification }

// SetWatch is what must be watched now. With Delta, only the paths changed
// since the last SetWatch, by Added and Removed: a driver may apply those
// instead of comparing the whole lists (a plan of 5,000 steps names 10,000
// paths, and the running step's report folder changes with every step).
type SetWatch struct {
	Paths, Trees   []string
	Delta          bool
	Added, Removed []string
}

// SetTimer asks for TimerFired at At; a zero At cancels it.
type SetTimer struct{ At time.Time }

// JournalEntry is a journal entry.
type JournalEntry struct{ Entry Entry }

// Log is a line for the operator.
type Log struct {
	Level slog.Level
	Msg   string
	Args  []any
	// ConfigErr: the line says a configuration error keeps a step from
	// launching. A driver that returns that error (check, step, watch
	// --exit-when-done) leaves the line out: the error is printed once, by main.
	ConfigErr bool
}

// ReportVerdict answers a ReportIn: accepted, or refused with every reason.
type ReportVerdict struct {
	Ref      string
	Step     string
	Accepted bool
	Reasons  []string
}

// WaitInherited asks the driver to wait for the agent a previous stepseq left for
// Step, and to answer InheritedGone.
type WaitInherited struct{ Step string }

func (WriteState) isEffect()    {}
func (ReadState) isEffect()     {}
func (StartAgent) isEffect()    {}
func (StopAgent) isEffect()     {}
func (Notify) isEffect()        {}
func (SetWatch) isEffect()      {}
func (SetTimer) isEffect()      {}
func (JournalEntry) isEffect()  {}
func (Log) isEffect()           {}
func (ReportVerdict) isEffect() {}
func (WaitInherited) isEffect() {}

// Notification is one report to the user: the seed's main-agent format with its
// context.
type Notification struct {
	Time   time.Time `json:"time"`
	Plan   string    `json:"plan"`
	Step   string    `json:"step,omitempty"`
	Try    int       `json:"try,omitempty"`
	Who    string    `json:"who"` // stepseq, or the worker
	Status string    `json:"status"`
	// Event says what happened beyond the seed's status words.
	Event  string `json:"event,omitempty"`
	Output string `json:"output"`
	Next   string `json:"next"`
	// Run names the run; empty for the workspace's own, state.json.
	Run string `json:"run,omitempty"`
	// Summary is what the plan's summary gave, carried by the
	// plan's last report: its plan_done or plan_blocked.
	Summary map[string]any `json:"summary,omitempty"`
	// Spend is what the run spent so far; nil when nothing yet.
	Spend *planspec.Spend `json:"spend,omitempty"`
	// Sinks are where the plan says its reports go: its notify: list, from the
	// state the transition is of, as Plan is. Empty, not nil, when the plan
	// lists none; nil when the machine holds no state (its file gone or
	// unreadable), which says nothing of the sinks. It is the notifier's to
	// route by, not part of the report.
	Sinks []planspec.NotifySink `json:"-"`
}

// Notification events: what happened beyond the seed's six status words
// (dispatching, in_progress, milestone, blocked, done, heartbeat).
const (
	EventRetrying         = "retrying"          // dispatching: a try after a failed one
	EventTryFailed        = "try_failed"        // milestone: the try failed; the usual rules decide what follows
	EventTimeout          = "timeout"           // milestone (launch timeout) or blocked (milestone or idle timeout)
	EventRetriesExhausted = "retries_exhausted" // blocked: the step's tries reached its retry limit
	EventPlanBlocked      = "plan_blocked"      // blocked: the plan is held by a step
	EventPlanDone         = "plan_done"         // done: every step is done
	EventSkipped          = "skipped"           // done: the step's skip condition held
	EventReviewing        = "reviewing"         // in_progress: the worker says done; stepseq verifies before telling done
	EventAcceptImplied    = "accept_implied"    // in_progress: a done came while dispatching and stands for the accept too
	// EventHeld: milestone: a plan or run file appeared while a sandboxed agent
	// ran; it is not taken up until it is touched again.
	EventHeld = "held"
)

// CondSet evaluates a state's conditions: *Conditions, or a fake in tests. now
// is the time of the input being handled: a condition sees that time, not the
// wall clock.
type CondSet interface {
	Cond(now time.Time, id, kind string) (bool, error)
	Check(now time.Time, id string) func() (bool, error)
	// Reads are the literal paths and globs step id's when and skip name, and
	// whether they are all those conditions may read (false when a path is
	// built at run time).
	Reads(id string) (paths, globs []string, known bool)
}

// Probe is what the machine may ask of the world. Every answer is a read; none
// changes anything.
type Probe interface {
	// Conditions compiles st's conditions.
	Conditions(st *planspec.State) (CondSet, error)
	// Missing lists which of the workspace paths do not exist.
	Missing(paths []string) []string
	// ModTime is a changed file's modification time; false for a folder or none.
	ModTime(rel string) (time.Time, bool)
	// Orphan is what step id's try lock says of its try that started at started
	// (agent.startedIso): whether its agent still runs, and how it ended when an
	// earlier stepseq reaped it but died before recording the verdict.
	Orphan(id string, try int, started string) TryState
	// CanLaunch says why step id's agent cannot start (a configuration error), or nil.
	CanLaunch(st *planspec.State, id string) error
	// LastOutput is when the running agent last wrote a byte; zero when never.
	LastOutput() time.Time
	// WatchSet is what the whole plan needs watched.
	WatchSet(st *planspec.State, conds CondSet) (paths, trees []string)
	// ReportsDir is step id's report folder, relative to the workspace.
	ReportsDir(id string) string
}

// MachineConfig is what a driver tells the machine once.
type MachineConfig struct {
	Driver     string // check, step, watch, mcp: named in the journal
	MaxRetries int    // STEP_MAX_RETRIES
	// Persistent drivers (watch, mcp) watch the whole plan and outlive a plan;
	// check and step watch only what a running step needs.
	Persistent bool
	// StampHeartbeat sets lastHeartbeatIso on every pass, as the check script does.
	StampHeartbeat bool
	Probe          Probe
	// TriggerQuiet is the trigger folder's quiet window (0: DefaultTriggerQuiet),
	// TriggerHold how long at most a trigger waits for a burst to end (0:
	// DefaultTriggerHold), and TriggersDir that folder, workspace-relative, for
	// FolderTimes.
	TriggerQuiet time.Duration
	TriggerHold  time.Duration
	TriggersDir  string
	// PlanSettle is how long a plan file that does not parse must have been
	// still before it is judged (0: DefaultPlanSettle).
	PlanSettle time.Duration
	// Run is the run's name, "" for the workspace's own: the command that
	// answers a gate names it.
	Run string
	// Sandbox is --sandbox and --require-sandbox.
	Sandbox SandboxPolicy
}

// Default report timers.
const (
	DefaultLaunchTimeout    = 10 * time.Minute
	DefaultMilestoneTimeout = 10 * time.Minute
	DefaultHeartbeat        = 5 * time.Minute
)

// stateReread bounds the re-reads of a state file caught mid-write before it is
// reported as invalid and left until it changes.
const stateReread = 8

// Machine is the reconcile core's state: the plan's state and what is in flight.
type Machine struct {
	// cursorRendered is the step and try whose templates were rendered when
	// the cursor reached it (renderAtCursor), once.
	cursorRendered string

	cfg MachineConfig

	now   time.Time
	out   []Effect
	st    *planspec.State
	conds CondSet

	bad      error // the state file does not parse: never overwrite it
	badTries int
	badAt    time.Time

	dirty   bool   // st differs from the file on disk
	reason  string // why, for the write's journal entry
	writing bool   // a WriteState is out
	// writeErr is the last failed write: nothing launches until a write succeeds.
	writeErr       error
	writeFailedNow bool // the write failed during this input
	writeTries     int
	writeAt        time.Time

	run       *tryRun         // the try dispatched, launched or being judged
	pending   *tryExit        // an exit to judge once the state is read again
	awaiting  *tryExit        // exited 0, outputs awaited until deadline
	removed   *planspec.State // the state held when its file was removed, until taken
	inherited bool            // waiting for an agent a previous stepseq left
	delayAt   time.Time
	limitAt   time.Time // a step waits out a usage limit until then
	// approvalAt is when the gate waited on times out; tellAfterWrite are
	// the gates' requests, told once the write that records them is done.
	approvalAt time.Time
	// decideAgain: a gate answered by its timeout during a graph's pass; the
	// graph is decided again once that pass is acted on.
	decideAgain    bool
	tellAfterWrite []Effect
	force          bool // RunCurrent: the runner's step is due
	forced         string
	stopping       bool

	triggers  []Trigger
	changed   []string       // paths that start the next run
	agentRuns [][2]time.Time // when recent agents ran: their changes trigger nothing
	onHandled time.Time      // changes up to this time have had their on: re-run

	told      Decision // the last wait logged, so a wait is logged once
	configErr error
	progress  bool // a try was launched or judged: what the chain achieved is kept
	forceFail bool // the runner's step failed
	watched   [2][]string
	// planGen counts the states and plans adopted; base is the plan's watch set
	// as of gen, asked of the probe once per plan rather than once per input.
	// A persistent machine's watch set is the base and at most two extra
	// paths, report folders the base lacks (reportWatches): setOf says which
	// base (by gen) and which extras were last emitted.
	planGen int
	base    struct {
		gen          int
		paths, trees []string
	}
	setOf struct {
		ok    bool
		gen   int
		extra []string
	}
	lastEnded string // the step whose try ended last: its report folder stays watched
	timerAt   time.Time
	lastNote  time.Time // when the user last heard of the running step
	planDone  bool      // the plan's DONE was told
	// toldBlocked is the step whose hold on the plan was told: by this
	// machine, or by the stepseq that wrote the blocked phase it read.
	toldBlocked string
	intake      intakeWaits
	stamped     bool      // lastHeartbeatIso was set by a decision of this machine
	wall        time.Time // the last input's time, without its monotonic reading
	// lanes are a graph's tries in flight, by step instance (machine_lanes.go);
	// toldSteps the steps whose block was told while the rest went on.
	lanes     map[string]*lane
	toldSteps map[string]bool
	merging   bool // a MergeWorktrees is out
}

// tryRun is the try in flight.
type tryRun struct {
	step       string
	try        int
	prompt     string
	launched   bool      // Launch was emitted (after the write that records it)
	dispatched time.Time // when it was marked IN_PROGRESS
	lastReport time.Time
	// stopReason is why the machine stopped the agent: its verdict when it exits.
	stopReason string
	doneReport bool // a done report was accepted: the worker says it is finished
	// invalidResults counts the done reports refused for a result that fails the
	// step's schema.
	invalidResults int
	blockedBy      string
	changed        []string
	resumed        bool // an interrupted try run again under its own number
	resume         planspec.AgentSession
	sandbox        *planspec.Sandbox
}

type tryExit struct {
	agentFailed string
	refused     string // what the CLI's permissions refused: the error ends with it
	blocked     string // the worker's blocked report holds the step
	step        string
	try         int
	exit        Exit
	deadline    time.Time
	stop        string
	done        bool
	limits      []Limit
	session     planspec.AgentSession
	result      json.RawMessage // from the agent's output (resultFrom: output)
	resultErr   string
	kept        json.RawMessage // the result the verdict found, for the run record
	usage       *planspec.Usage
	usageErr    string
	agent       string
}

// NewMachine returns a machine with no state: feed it a StateRead.
func NewMachine(cfg MachineConfig) *Machine {
	return &Machine{cfg: cfg}
}

// Config is what the machine was told at its start.
func (m *Machine) Config() MachineConfig { return m.cfg }

// StateInvalid is why the state file does not parse, nil when it does: the
// machine never writes over it.
func (m *Machine) StateInvalid() error { return m.bad }

// State is the machine's state; nil before a valid one was read.
func (m *Machine) State() *planspec.State { return m.st }

// Handle takes one input at time now and returns what the driver must do, in order.
func (m *Machine) Handle(now time.Time, in Input) []Effect {
	m.now = now
	m.out = nil
	m.writeFailedNow = false
	if m.clockBack(now) {
		m.clampFuture()
	}
	switch in := in.(type) {
	case StateRead:
		m.stateRead(in)
	case FilesChanged:
		m.filesChanged(in)
	case AgentExited:
		m.onLane(in.Step, func() { m.agentExited(in) })
	case ReportIn:
		m.onLane(in.Step, func() { m.report(in) })
	case TimerFired:
		m.timerFired()
	case TriggersIn:
		m.triggersIn(in.Triggers)
	case PlanEdited:
		m.planEdited(in)
	case Written:
		m.written(in.Err)
	case InheritedGone:
		m.inherited = false
		m.lanesInheritedGone()
	case RunCurrent:
		m.force = true
	case Shutdown:
		m.shutdown()
	case PlanApplied:
		m.planApplied(in)
	case TriggersQueued:
		m.triggersQueued(in)
	case PlanWriting:
		m.planWriting(in)
	case WorktreeMade:
		m.worktreeMade(in)
	case WorktreeCommitted:
		m.worktreeCommitted(in)
	case WorktreesMerged:
		m.worktreesMerged(in)
	}
	m.settle()
	return m.out
}

func (m *Machine) emit(e Effect) { m.out = append(m.out, e) }

func (m *Machine) journal(e Entry) { m.emit(JournalEntry{Entry: e}) }

func (m *Machine) log(level slog.Level, msg string, args ...any) {
	m.emit(Log{Level: level, Msg: msg, Args: args})
}

func (m *Machine) markDirty(reason string) {
	m.dirty = true
	m.reason = reason
}

// Busy reports whether a try is in flight: dispatched, running, awaited or waiting
// to be judged. A new plan waits for it.
func (m *Machine) Busy() bool {
	return m.run != nil || m.pending != nil || m.awaiting != nil || len(m.lanes) > 0
}

// TakeRemoved returns the state the machine held when its file was removed, once:
// the run that went with the file, for the driver to keep in the history.
func (m *Machine) TakeRemoved() *planspec.State {
	st := m.removed
	m.removed = nil
	return st
}

// Holds reports whether the machine still waits on the exited try: to judge it,
// or for the outputs it awaits. What the try's agent left running may stay
// until then.
func (m *Machine) Holds(step string, try int) bool {
	for _, t := range []*tryExit{m.pending, m.awaiting} {
		if t != nil && t.step == step && t.try == try {
			return true
		}
	}
	return m.holdsLane(step, try)
}

// Done reports whether the plan is DONE with nothing in flight.
func (m *Machine) Done() bool {
	return m.st != nil && m.st.Status == planspec.StatusDone && !m.Busy() && m.bad == nil
}

// Blocked reports whether the plan is held by a blocker with nothing in flight.
func (m *Machine) Blocked() bool {
	return m.st != nil && !m.Busy() && (m.told.Action == Blocked || m.told.Action == OverBudget) && m.st.Status != planspec.StatusDone
}

// CannotLaunch is the configuration error that keeps the step due now from
// starting (no agent command, the plan's agent refused), with nothing in flight;
// nil when there is none.
func (m *Machine) CannotLaunch() error {
	if m.configErr == nil || m.Busy() || m.told.Action != Launch {
		return nil
	}
	return m.configErr
}

// Settled reports whether a one-shot driver (check, step) is finished: nothing in
// flight, no delay or re-read to wait for, no write to retry.
func (m *Machine) Settled() bool {
	switch {
	case m.writing:
		return false
	case m.writeErr != nil && (m.run == nil || !m.run.launched) && m.pending == nil && m.awaiting == nil && len(m.lanes) == 0:
		return true // no agent of its own runs: a one-shot driver exits with the error
	case m.Busy():
		return false
	case m.configErr != nil || m.writeErr != nil:
		return true
	case m.bad != nil:
		return m.badAt.IsZero()
	case m.dirty && m.st != nil:
		return false
	}
	return m.delayAt.IsZero()
}

// Err is what ends a one-shot driver badly: a configuration error, a state file
// that stays invalid, a write that failed.
func (m *Machine) Err() error {
	switch {
	case m.configErr != nil:
		return m.configErr
	case m.bad != nil:
		return m.bad
	case m.writeErr != nil:
		return m.writeErr
	}
	return nil
}

// ForcedFailed reports whether the runner's step (RunCurrent) ended FAILED.
func (m *Machine) ForcedFailed() bool { return m.forceFail }

// Decision is the last thing the core decided, for status and tests.
func (m *Machine) Decision() Decision { return m.told }

// settle runs after every input: triggers and on: globs between agents, the core's
// decision, the watches, the write and the timer. The watches come before the
// write: a write may offer a step (a pulled step's dispatch), and what its
// worker writes once it reads the offer (a report in the step's folder) must
// find the folder watched.
func (m *Machine) settle() {
	if m.st != nil && m.bad == nil && !m.Busy() {
		m.applyTriggers()
	} else if m.st != nil && m.bad == nil && m.graph() {
		m.applyRetries()
	}
	m.advance()
	m.watch()
	m.flush()
	m.arm()
}

// flush asks for the write of a changed state, one at a time, never over a file
// that does not parse.
func (m *Machine) flush() {
	if !m.dirty || m.writing || m.st == nil || m.bad != nil || m.stopping && (m.run != nil || len(m.lanes) > 0) {
		return
	}
	if m.writeFailedNow {
		return // retried on the next input or at writeAt, not in a loop
	}
	if m.configErr != nil && !m.progress && !m.cfg.Persistent {
		return // a configuration error touches nothing of this step
	}
	m.writing = true
	m.dirty = false
	m.emit(WriteState{State: m.st, Reason: m.reason})
}

func (m *Machine) written(err error) {
	m.writing = false
	if err != nil {
		m.dirty = true
		m.writeFailedNow = true
		m.writeTries++
		backoff := min(time.Duration(50<<min(m.writeTries, 10))*time.Millisecond, 30*time.Second)
		m.writeAt = m.now.Add(backoff)
		if m.writeErr == nil {
			m.log(slog.LevelError, "state not written: nothing launches until a write succeeds; retrying", "err", err)
			m.journal(Entry{Event: "write-error", Reason: err.Error()})
		}
		m.writeErr = err
		return
	}
	if m.writeErr != nil {
		m.log(slog.LevelInfo, "state written again: resuming", "after", m.writeTries)
		m.journal(Entry{Event: "write-resumed", Detail: map[string]any{"failures": m.writeTries}})
	}
	m.writeErr, m.writeTries, m.writeAt = nil, 0, time.Time{}
	m.journal(Entry{Event: "write", Reason: m.reason, Detail: map[string]any{"status": m.st.Status, "cursor": m.st.CurrentStep}})
	m.tellAsked()
	m.launchWritten()
	m.launchLanes()
}

// launchWritten launches the try whose write is done.
func (m *Machine) launchWritten() {
	if r := m.run; r != nil && !r.launched && !m.stopping {
		r.launched = true
		m.emit(StartAgent{Step: r.step, Try: r.try, Prompt: r.prompt, Changed: r.changed, Resumed: r.resumed, Resume: r.resume, Sandbox: r.sandbox})
		next := "it runs until it exits; then its outputs are checked"
		if m.st.UsesReports(r.step) {
			next = "waiting for the worker to accept"
		}
		event := ""
		if r.try > 1 && !r.resumed {
			event = EventRetrying
		}
		m.notifyEvent(r.step, r.try, planspec.PhaseDispatching, event, "agent launched", next)
	}
}

// watch asks for the watch set when it changed.
func (m *Machine) watch() {
	var paths, trees []string
	if m.cfg.Persistent {
		var done bool
		if paths, trees, done = m.persistentWatch(); done {
			return
		}
	} else {
		paths = m.oneShotWatch()
	}
	if slices.Equal(paths, m.watched[0]) && slices.Equal(trees, m.watched[1]) {
		return
	}
	m.watched = [2][]string{paths, trees}
	m.emit(SetWatch{Paths: paths, Trees: trees})
}

// persistentWatch is a persistent driver's watch set: the plan's (made again
// only for a new plan) with the running try's report folders. When only those
// changed, the change goes out as a delta here, and done is true; done is true
// too when nothing changed.
func (m *Machine) persistentWatch() (paths, trees []string, done bool) {
	if m.cfg.Probe == nil {
		return nil, nil, true
	}
	if m.base.gen != m.planGen || m.base.paths == nil {
		m.base.gen = m.planGen
		m.base.paths, m.base.trees = m.cfg.Probe.WatchSet(m.st, m.conds)
		m.base.paths = slices.Compact(slices.Sorted(slices.Values(m.base.paths)))
	}
	extra := m.reportWatches()
	sameBase := m.setOf.ok && m.setOf.gen == m.base.gen
	if sameBase && slices.Equal(extra, m.setOf.extra) {
		return nil, nil, true // nothing to compare: the set is made of the same parts
	}
	paths, trees = insertAllSorted(m.base.paths, extra), m.base.trees
	was := m.setOf.extra
	m.setOf.ok, m.setOf.gen, m.setOf.extra = true, m.base.gen, extra
	if !sameBase {
		return paths, trees, false
	}
	w := SetWatch{Paths: paths, Trees: trees, Delta: true, Added: missingFrom(was, extra), Removed: missingFrom(extra, was)}
	m.watched = [2][]string{paths, trees}
	m.emit(w)
	return nil, nil, true
}

// missingFrom are the paths of in that list lacks.
func missingFrom(list, in []string) []string {
	var out []string
	for _, p := range in {
		if !slices.Contains(list, p) {
			out = append(out, p)
		}
	}
	return out
}

// oneShotWatch is what a one-shot driver watches, sorted: a running step's
// reports only where the plan takes them (others are read when the agent
// exits), and the outputs an exited try awaits.
func (m *Machine) oneShotWatch() []string {
	var paths []string
	if m.run != nil && m.run.launched && m.st != nil && m.st.UsesReports(m.run.step) {
		paths = append(paths, m.cfg.Probe.ReportsDir(m.run.step))
	}
	if m.awaiting != nil && m.st != nil {
		if spec := m.st.Steps[m.awaiting.step]; spec != nil {
			paths = append(paths, spec.RequiredOutputs...)
		}
	}
	for _, id := range m.laneSteps() {
		if m.st != nil && m.st.UsesReports(id) {
			paths = append(paths, m.cfg.Probe.ReportsDir(id))
		}
	}
	paths = append(paths, m.laneAwaited()...)
	slices.Sort(paths)
	return slices.Compact(paths)
}

// reportWatches are the report folders a persistent machine watches beyond
// the plan's set, sorted: the running step's, and the folder of the step whose
// try ended last, so that a report dropped there after its try is over is
// judged (refused as stale, its writer told why) rather than never seen.
func (m *Machine) reportWatches() []string {
	var out []string
	for _, id := range append([]string{m.runningStep(), m.lastEnded}, m.laneSteps()...) {
		if id == "" || m.st == nil || m.st.Steps[id] == nil {
			continue
		}
		if dir := m.cfg.Probe.ReportsDir(id); !sortedHas(m.base.paths, dir) && !slices.Contains(out, dir) {
			out = append(out, dir)
		}
	}
	slices.Sort(out)
	return out
}

func (m *Machine) runningStep() string {
	if m.run == nil {
		return ""
	}
	return m.run.step
}

// insertAllSorted returns sorted with the sorted paths ps in their places, in
// one copy; sorted itself when ps adds nothing.
func insertAllSorted(sorted, ps []string) []string {
	var add []string
	for _, p := range ps {
		if !sortedHas(sorted, p) {
			add = append(add, p)
		}
	}
	if len(add) == 0 {
		return sorted
	}
	out := make([]string, 0, len(sorted)+len(add))
	i := 0
	for _, p := range add {
		j, _ := slices.BinarySearch(sorted[i:], p)
		out = append(append(out, sorted[i:i+j]...), p)
		i += j
	}
	return append(out, sorted[i:]...)
}

func sortedHas(sorted []string, p string) bool {
	_, found := slices.BinarySearch(sorted, p)
	return found
}

// arm asks for the one timer at the earliest thing the machine waits for.
func (m *Machine) arm() {
	next := m.nextTimer()
	if next.Equal(m.timerAt) {
		return
	}
	m.timerAt = next
	m.emit(SetTimer{At: next})
}

func (m *Machine) nextTimer() time.Time {
	var next time.Time
	add := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	add(m.delayAt)
	add(m.limitAt)
	add(m.approvalAt)
	add(m.triggersDue())
	add(m.intake.planAt)
	add(m.badAt)
	if m.writeErr != nil {
		add(m.writeAt)
	}
	if m.awaiting != nil {
		add(m.awaiting.deadline)
	}
	if r := m.run; r != nil && r.launched && r.stopReason == "" {
		for _, t := range m.reportDeadlines(r) {
			add(t)
		}
	}
	m.lanesTimer(add)
	return next
}

func (m *Machine) timerFired() {
	m.intakeTimers()
	if m.bad != nil && !m.badAt.IsZero() && !m.now.Before(m.badAt) {
		m.badAt = time.Time{}
		m.emit(ReadState{})
	}
	if m.awaiting != nil {
		m.checkAwaiting()
	}
	if r := m.run; r != nil && r.launched && r.stopReason == "" {
		m.reportTimers(r)
	}
	m.lanesTimerFired()
	// A delay that is over is dropped by advance, which decides again.
}

func (m *Machine) shutdown() {
	m.stopping = true
	m.delayAt, m.limitAt = time.Time{}, time.Time{}
	m.lanesShutdown()
	if r := m.run; r != nil {
		if !r.launched {
			m.run = nil
			return
		}
		m.emit(StopAgent{Step: r.step, Try: r.try, Reason: "shutdown"})
	}
}

func (m *Machine) notify(step string, try int, who, status, output, next string) {
	plan := ""
	var sinks []planspec.NotifySink
	if m.st != nil {
		plan = m.st.Settings.Name
		if sinks = m.st.Settings.Notify; sinks == nil {
			sinks = []planspec.NotifySink{}
		}
		if p := m.st.Progress(step); p != "" {
			output += " (" + p + ")"
		}
	}
	m.lastNote = m.now
	m.emit(Notify{Note: Notification{Time: m.now, Plan: plan, Step: step, Try: try, Who: who, Status: status, Output: output, Next: next, Sinks: sinks,
		Spend: spendOf(m.st)}})
}

// triggersIn queues triggers for the pass between agents. A retry of the step whose
// agent still runs (a worker that blocked and hangs there) stops that agent first.
func (m *Machine) triggersIn(ts []Trigger) {
	for _, t := range ts {
		m.onLane(t.Step, func() {
			if r := m.run; t.Retry && r != nil && r.step == t.Step && r.launched && r.stopReason == "" {
				r.stopReason = "stopped for a retry"
				m.emit(StopAgent{Step: r.step, Try: r.try, Reason: r.stopReason})
			}
		})
	}
	m.triggers = append(m.triggers, m.takeAnswers(ts)...)
}
