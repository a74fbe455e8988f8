package web

import (
	"sync"
	"time"
)

// Source is what the page shows and when to look again. View must be safe to
// call from several goroutines at once and should be cheap: each change is
// read once for all open pages. A view handed out is the page's to read while
// the source moves on: the source must not change it, nor the slices and
// reports it holds, afterwards.
type Source interface {
	// View is the workspace as of now.
	View() View
	// Changed returns a channel that is closed at the first change after the
	// call. A change the page must show without one (a log that grows) is
	// picked up by [Options.Refresh].
	Changed() <-chan struct{}
}

// Phases of a step, as the state's run records name them.
const (
	PhasePlanned     = "planned"
	PhaseDispatching = "dispatching"
	PhaseInProgress  = "in_progress"
	PhaseBlocked     = "blocked"
	PhaseReviewing   = "reviewing"
	PhaseDone        = "done"
	// PhaseWaiting: the plan reached the step but it may not start yet: its
	// when: is false, the plan's step delay has not passed, or its agents
	// are out of quota until a reset. StepView.Waits says which.
	PhaseWaiting = "waiting"
	// PhaseAwaitingApproval: the step waits for a person's yes before it starts.
	PhaseAwaitingApproval = "awaiting_approval"
)

// View is one picture of a workspace: its plan, the plan's steps and the
// notifications sent so far. Every string in it may come from a plan, an
// agent or a log, and is shown escaped.
type View struct {
	Plan     string // the plan's name
	Status   string // where the run stands: active, blocked or done (core.RunWord); "no state" without one
	Waiting  string // what the plan waits for, in words; may be empty
	Blockers []string
	// Sandbox says which steps run sandboxed and which edit unattended without
	// a sandbox, a line each.
	Sandbox []string
	// Params are the run's params and Summary what the plan's summary gave
	// when it ended, by name, each value as JSON.
	Params, Summary []Field
	// Spend is what the run's agents spent and may spend, in words; empty
	// before they spent anything and without a budget.
	Spend string
	// Reports is whether the plan's workers report Without reports
	// a step in_progress is shown as "running": nobody said it was accepted.
	Reports bool
	Steps   []StepView
	// Notifications in the order they were sent; the page shows the newest
	// first.
	Notifications []NoteView
	// Edges are the graph's arrows, from step id to step id. Without edges the
	// steps are drawn as a chain in their order. An edge naming no step is
	// left out.
	Edges [][2]string
	// Loops are the plan's repeat groups, each drawn as a frame
	// around its steps with its back edge.
	Loops []LoopView
	// Runs are the workspace's other runs, beside the one shown.
	Runs []RunView
	// Gate is the gate that waits for a person's yes; nil when none does.
	Gate *GateView
}

// GateView is a gate awaiting a person's yes: what it asks and the commands
// that answer it. The page's buttons answer it through [Gates].
type GateView struct {
	Step     string // the step whose gate it is, or which the plan's holds
	Plan     bool   // the plan's gate
	Question string // what is asked
	Approve  string // the command that says yes
	Reject   string // the command that says no
}

// RunView is one run beside the workspace's own: state.NAME.json.
type RunView struct {
	Name, Plan string
	Status     string // active, blocked, done, closed or invalid
	Done       int    // steps DONE
	Steps      int
	Current    string // the step at the cursor
	Error      string // why its state file cannot be read
	// Awaiting is the gate the run waits on for a person's yes: "plan", or
	// the step whose gate it is; "" when none waits.
	Awaiting string
	Spent    string // what its agents spent, in words; empty when nothing
}

// LoopView is a repeat group: its steps, in order, and a label saying where
// its loop stands ("rounds · round 2/5").
type LoopView struct {
	Steps []string
	Label string
}

// Field is one named value of the plan: a param, a summary's entry.
type Field struct {
	Name, Value string
}

// StepView is one step's line.
type StepView struct {
	ID         string
	Title      string
	Phase      string // one of the Phase constants; another value is shown as it is, in grey
	Status     string // the original's status: PENDING, IN_PROGRESS, DONE, FAILED
	Tries      int
	DurationMs *int64 // the last try's run time; nil when none was recorded
	Running    bool   // the duration grows: the page ticks it between updates
	Error      string // the last failed try's error
	Blocker    string // why the step cannot go on, when it is blocked
	Waits      string // what a waiting step waits for, as status says it
	LastReport *ReportView
	LogTail    string // the end of the current try's log; the page shows the last Options.LogTailBytes
	Spend      string // what the step's tries spent, in words; empty when nothing is known
}

// ReportView is a worker's report.
type ReportView struct {
	Status   string // accepted, milestone, blocked, done
	Summary  string
	Evidence string
	Risk     string
	Next     string
	Time     time.Time
}

// NoteView is one notification sent to the user.
type NoteView struct {
	Time   time.Time
	Step   string
	Try    int
	Status string
	Event  string // what happened beyond the status word
	Output string
	Next   string
	Run    string // the run it is about; empty for the workspace's own
}

// Signal is the Changed half of a Source: Changed hands out a channel that the
// next Notify closes. The zero value is ready to use.
type Signal struct {
	mu sync.Mutex
	ch chan struct{}
}

// Changed returns a channel that is closed by the next Notify.
func (s *Signal) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// Notify wakes everyone waiting on a channel from Changed.
func (s *Signal) Notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}
