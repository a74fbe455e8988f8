package core

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/stepseq/stepseq/planspec"
	"github.com/stepseq/stepseq/planspec/plan"
)

// The core's rules as scenario files, after etcd raft's interaction tests: each
// file under testdata/scenarios is a sequence of inputs (a plan or state, files
// and their times, agent exits, reports, timers, triggers) and the effects the
// machine answers with, run against a scripted world instead of a real one.
// `go test ./executor/core -run TestScenarios -rewrite` writes the effects back
// into the files; read the diff before keeping it.
//
// Commands (times are durations after the scenario's start, t0):
//
//	plan|state [persistent] [driver=D] [retries=N] [stamp] [runner]   a new machine on the YAML plan or JSON state given;
//	                             runner: told first to run the step at the cursor (stepseq step)
//	empty [persistent] [...]     a new machine on a workspace with no state file
//	read [missing|invalid]       the state file read again: the JSON given, gone, or half-written
//	at T                         the clock moves to t0+T
//	file P... [mtime=T]          paths exist, modified at T (default: now)
//	rm P...                      paths are gone
//	touch P...                   paths modified now, and the change fed in
//	changed P... [rescan]        a change of paths fed in
//	cond STEP [when=V] [skip=V]  a step's conditions (true, false, error)
//	check STEP=V                 a step's check (true, false, error)
//	orphan STEP [alive] [exited code=N] [signal] [stopped] [recorded began=T] [ends]   what a try lock says;
//	                             ends: alive to the next probe, then ended as the rest says (it ends between two probes)
//	cannot-launch [STEP]         the step's agent cannot start: the input is why; with no input, it can
//	output T                     the running agent last wrote a byte at T
//	exit STEP [try=N] [code=N] [timeout] [err] [failed] [limit=T|limit] [out=TEXT] [session=ID] [result]
//	                             the agent's end; the input is its stderr, or with result the
//	                             result its output gave
//	report STEP [try=N] [via=V] [ref=R] [written=T]   a report; the input is its YAML
//	tick                         the clock moves to the timer asked for, which fires
//	timer                        the timer fires now
//	trigger STEP... [retry] [from=F]   triggers queued
//	approve|reject [STEP] [by=U] [face=F]   a person's answer to the gate that waits, or to STEP's
//	                             (as the faces resolve it); the input is its note
//	edit                         the plan file edited: the input is its YAML
//	apply                        a plan taken in from plans/q.yaml: the input is its YAML
//	triggers-queued [mtime=T] [now]   the trigger folder changed (modified at T); now: drain at once
//	plan-writing mtime=T         a plan file that does not parse yet, modified at T
//	fail-writes [off]            writes fail (the input is why) until off
//	merge-fails [off]            merges at a join fail (the input is why) until off
//	shutdown | inherited-gone
//	status                       what the machine holds
//	rounds STEP... n=N           N rounds of a loop's steps: each exits in turn with the result
//	                             its line of the input gives ("STEP JSON", ${round} its round);
//	                             only the last exit's effects are shown
//	loops                        each loop's round, kept rounds, totals, and the summary
//	crash [persistent]           a new machine on what the last write put on disk
//
// A command's output lists its effects, one a line. Journal entries of the routine
// events (write, state-read, decide) and log lines show only with `verbose`.

var scenarioRoutine = []string{"write", "state-read", "decide"}

// world is what the fake Probe answers: files and their times, conditions,
// try locks, configuration errors.
type world struct {
	files     map[string]time.Time
	conds     map[string]string // "id/when", "id/skip" → true, false, error
	checks    map[string]string
	orphans   map[string]TryState
	ending    map[string]TryState // what a try lock says once the next probe has found it alive
	launchErr map[string]string   // step ("" for every step) → why
	lastOut   time.Time
	mergeFail string // why a merge at a join fails; "": it succeeds
}

func (w *world) Conditions(st *planspec.State) (CondSet, error) { return scriptedConds{w, st}, nil }

func (w *world) Missing(paths []string) []string {
	var out []string
	for _, p := range paths {
		if _, ok := w.files[p]; !ok {
			out = append(out, p)
		}
	}
	return out
}

func (w *world) ModTime(rel string) (time.Time, bool) { t, ok := w.files[rel]; return t, ok }

// FolderModTime answers the quiet window's question of the trigger folder.
func (w *world) FolderModTime(rel string) (time.Time, bool) { t, ok := w.files[rel]; return t, ok }

func (w *world) Orphan(id string, _ int, _ string) TryState {
	ts := w.orphans[id]
	if next, ok := w.ending[id]; ok {
		delete(w.ending, id)
		w.orphans[id] = next
	}
	return ts
}

func (w *world) CanLaunch(_ *planspec.State, id string) error {
	if why, ok := w.launchErr[id]; ok {
		return errors.New(why)
	}
	if why, ok := w.launchErr[""]; ok {
		return errors.New(why)
	}
	return nil
}

func (w *world) LastOutput() time.Time { return w.lastOut }

// WatchSet is the state file and every step's required outputs: enough to see
// the machine ask for a new set when the plan changes.
func (w *world) WatchSet(st *planspec.State, _ CondSet) (paths, trees []string) {
	paths = []string{"state.json"}
	if st == nil {
		return paths, nil
	}
	for _, id := range st.StepQueue {
		if sp := st.Steps[id]; sp != nil {
			paths = append(paths, sp.RequiredOutputs...)
		}
	}
	return paths, nil
}

func (w *world) ReportsDir(id string) string { return reportsRel(id) }

// scriptedConds answer with the values a scenario scripts; what a step's
// conditions read comes from their real text.
type scriptedConds struct {
	w  *world
	st *planspec.State
}

func scriptedValue(v string) (bool, error) {
	switch v {
	case "false":
		return false, nil
	case "error":
		return false, errors.New("scripted evaluation error")
	}
	return true, nil
}

func (c scriptedConds) Cond(_ time.Time, id, kind string) (bool, error) {
	v, ok := c.w.conds[id+"/"+kind]
	if !ok {
		return kind == "when", nil
	}
	return scriptedValue(v)
}

func (c scriptedConds) Reads(id string) (paths, globs []string, known bool) {
	spec := c.st.Steps[id]
	if spec == nil {
		return nil, nil, true
	}
	for _, src := range []string{spec.When, spec.Skip} {
		if src == "" {
			continue
		}
		cond, err := plan.CompileCondition(src)
		if err != nil || !cond.PathsKnown() {
			return nil, nil, false
		}
		p, g := cond.Paths()
		paths, globs = append(paths, p...), append(globs, g...)
	}
	return paths, globs, true
}

func (c scriptedConds) Check(_ time.Time, id string) func() (bool, error) {
	v, ok := c.w.checks[id]
	if !ok {
		return nil
	}
	return func() (bool, error) { return scriptedValue(v) }
}

// scenario is one file's machine, its world and its driver's answers.
type scenario struct {
	w         *world
	m         *Machine
	now       time.Time
	timer     time.Time
	failWrite error
	started   map[string]time.Time // step → when its agent started
	running   map[string]int       // step → the try started
	last      map[string]string    // what the last write said of each run
	lastBlk   []string
	disk      []byte // what the last successful write put on disk
}

func newScenario() *scenario {
	return &scenario{
		w: &world{files: map[string]time.Time{}, conds: map[string]string{}, checks: map[string]string{},
			orphans: map[string]TryState{}, ending: map[string]TryState{}, launchErr: map[string]string{}},
		now: t0, started: map[string]time.Time{}, running: map[string]int{}, last: map[string]string{},
	}
}

func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/scenarios", func(t *testing.T, path string) {
		t.Parallel()
		s := newScenario()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return s.do(t, d)
		})
	})
}

func rel(at time.Time) string {
	if at.IsZero() {
		return "off"
	}
	return "t+" + at.Sub(t0).String()
}

func (s *scenario) dur(t *testing.T, d *datadriven.TestData, v string) time.Time {
	dd, err := time.ParseDuration(v)
	if err != nil {
		d.Fatalf(t, "%q: %v", v, err)
	}
	return t0.Add(dd)
}

// paths are the command's bare arguments.
func paths(d *datadriven.TestData) []string {
	var out []string
	for _, a := range d.CmdArgs {
		if len(a.Vals) == 0 {
			out = append(out, a.Key)
		}
	}
	return out
}

func argOr(d *datadriven.TestData, key, def string) string {
	if a, ok := d.Arg(key); ok && len(a.Vals) > 0 {
		return strings.Join(a.Vals, ", ")
	}
	return def
}

func (s *scenario) do(t *testing.T, d *datadriven.TestData) string {
	verbose := d.HasArg("verbose")
	switch d.Cmd {
	case "plan", "state", "empty", "crash":
		return s.start(t, d, verbose)
	case "tick":
		if s.timer.IsZero() {
			return "no timer is set\n"
		}
		s.now = s.timer
		return "(now " + rel(s.now) + ")\n" + s.feed(TimerFired{}, verbose)
	case "status":
		return s.status()
	case "spend":
		return spendText(s.m.State())
	}
	if f, ok := scenarioLoops[d.Cmd]; ok {
		return f(s, t, d, verbose)
	}
	if f, ok := scriptWorld[d.Cmd]; ok {
		f(s, t, d)
		return ""
	}
	if f, ok := scenarioInputs[d.Cmd]; ok {
		return s.feed(f(s, t, d), verbose)
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

// start makes a new machine on the plan, the state or no state given, or,
// for crash, on what the last successful write put on disk: the state a crash
// leaves, with its agents gone.
func (s *scenario) start(t *testing.T, d *datadriven.TestData, verbose bool) string {
	var st *planspec.State
	var err error
	switch d.Cmd {
	case "plan":
		var p *plan.Plan
		if p, err = plan.ParsePlan(strings.NewReader(d.Input), "plans/p.yaml"); err == nil {
			st = p.State("plans/p.yaml", "h1")
		}
	case "state":
		st, err = planspec.ParseState(strings.NewReader(d.Input), "state.json")
	case "crash":
		if st, err = planspec.ParseState(bytes.NewReader(s.disk), "state.json"); err != nil {
			err = fmt.Errorf("the state on disk: %w", err)
		}
	}
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	retries := 3
	if d.HasArg("retries") {
		d.ScanArgs(t, "retries", &retries)
	}
	persistent := d.HasArg("persistent")
	driver := "check"
	if persistent {
		driver = "watch"
	}
	s.m = NewMachine(MachineConfig{Driver: argOr(d, "driver", driver), MaxRetries: retries, Persistent: persistent,
		StampHeartbeat: d.HasArg("stamp"), Probe: s.w, TriggersDir: MetaDir + "/triggers"})
	s.timer = time.Time{}
	s.last, s.lastBlk = map[string]string{}, nil
	out := ""
	if d.HasArg("runner") {
		out = s.feed(RunCurrent{}, verbose)
	}
	if st == nil {
		return out + s.feed(StateRead{Err: fs.ErrNotExist}, verbose)
	}
	return out + s.feed(StateRead{State: st}, verbose)
}

type scenarioCmd = func(s *scenario, t *testing.T, d *datadriven.TestData)

// scriptWorld are the commands that change the world, or the driver's answers,
// and feed nothing.
var scriptWorld = map[string]scenarioCmd{
	"at": func(s *scenario, t *testing.T, d *datadriven.TestData) { s.now = s.dur(t, d, d.CmdArgs[0].Key) },
	"file": func(s *scenario, t *testing.T, d *datadriven.TestData) {
		at := s.now
		if v := argOr(d, "mtime", ""); v != "" {
			at = s.dur(t, d, v)
		}
		for _, p := range paths(d) {
			s.w.files[p] = at
		}
	},
	"rm": func(s *scenario, _ *testing.T, d *datadriven.TestData) {
		for _, p := range paths(d) {
			delete(s.w.files, p)
		}
	},
	"cond": func(s *scenario, _ *testing.T, d *datadriven.TestData) {
		id := d.CmdArgs[0].Key
		for _, kind := range []string{"when", "skip"} {
			if v := argOr(d, kind, ""); v != "" {
				s.w.conds[id+"/"+kind] = v
			}
		}
	},
	"check": func(s *scenario, _ *testing.T, d *datadriven.TestData) {
		for _, a := range d.CmdArgs {
			s.w.checks[a.Key] = a.Vals[0]
		}
	},
	"orphan": func(s *scenario, t *testing.T, d *datadriven.TestData) {
		ts := TryState{Alive: d.HasArg("alive"), Exited: d.HasArg("exited"), Stopped: d.HasArg("stopped"), Recorded: d.HasArg("recorded")}
		if d.HasArg("code") {
			d.ScanArgs(t, "code", &ts.Code)
		}
		if d.HasArg("signal") {
			ts.Signal = "killed"
		}
		if v := argOr(d, "began", ""); v != "" {
			ts.Began = s.dur(t, d, v)
		}
		id := d.CmdArgs[0].Key
		delete(s.w.ending, id)
		if d.HasArg("ends") {
			s.w.ending[id] = ts
			ts.Alive = true
		}
		s.w.orphans[id] = ts
	},
	"cannot-launch": func(s *scenario, _ *testing.T, d *datadriven.TestData) {
		id := ""
		if len(d.CmdArgs) > 0 {
			id = d.CmdArgs[0].Key
		}
		if why := strings.TrimSpace(d.Input); why != "" {
			s.w.launchErr[id] = why
		} else {
			delete(s.w.launchErr, id)
		}
	},
	"output": func(s *scenario, t *testing.T, d *datadriven.TestData) { s.w.lastOut = s.dur(t, d, d.CmdArgs[0].Key) },
	"merge-fails": func(s *scenario, _ *testing.T, d *datadriven.TestData) {
		s.w.mergeFail = ""
		if !d.HasArg("off") {
			s.w.mergeFail = strings.TrimSpace(d.Input)
		}
	},
	"fail-writes": func(s *scenario, _ *testing.T, d *datadriven.TestData) {
		s.failWrite = nil
		if !d.HasArg("off") {
			s.failWrite = errors.New(strings.TrimSpace(d.Input))
		}
	},
}

// scenarioInputs are the commands that feed the machine one input.
var scenarioInputs = map[string]func(s *scenario, t *testing.T, d *datadriven.TestData) Input{
	"read": func(_ *scenario, t *testing.T, d *datadriven.TestData) Input {
		switch {
		case d.HasArg("missing"):
			return StateRead{Err: fs.ErrNotExist}
		case d.HasArg("invalid"):
			return StateRead{Err: errors.New("state.json: unexpected end of JSON input")}
		}
		st, err := planspec.ParseState(strings.NewReader(d.Input), "state.json")
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		return StateRead{State: st}
	},
	"touch": func(s *scenario, _ *testing.T, d *datadriven.TestData) Input {
		for _, p := range paths(d) {
			s.w.files[p] = s.now
		}
		return FilesChanged{Paths: paths(d)}
	},
	"changed": func(_ *scenario, _ *testing.T, d *datadriven.TestData) Input {
		ps := slices.DeleteFunc(paths(d), func(p string) bool { return p == "rescan" || p == "verbose" })
		return FilesChanged{Paths: ps, Rescan: d.HasArg("rescan")}
	},
	"exit": (*scenario).exit,
	"report": func(s *scenario, t *testing.T, d *datadriven.TestData) Input {
		rep, err := planspec.ParseReport(strings.NewReader(d.Input), "report")
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		in := ReportIn{Step: d.CmdArgs[0].Key, Report: rep, Via: argOr(d, "via", "file"), Ref: argOr(d, "ref", "r")}
		if d.HasArg("try") {
			d.ScanArgs(t, "try", &in.Try)
		}
		if v := argOr(d, "written", ""); v != "" {
			in.Written = s.dur(t, d, v)
		}
		return in
	},
	"timer": func(*scenario, *testing.T, *datadriven.TestData) Input { return TimerFired{} },
	"trigger": func(s *scenario, _ *testing.T, d *datadriven.TestData) Input {
		var ts []Trigger
		for _, p := range paths(d) {
			if p != "retry" && p != "verbose" {
				ts = append(ts, Trigger{Step: p, From: argOr(d, "from", "trigger"), At: planspec.FormatISO(s.now), Retry: d.HasArg("retry")})
			}
		}
		if len(ts) == 0 {
			ts = []Trigger{{From: argOr(d, "from", "check"), At: planspec.FormatISO(s.now)}}
		}
		return TriggersIn{Triggers: ts}
	},
	"approve": (*scenario).answer,
	"reject":  (*scenario).answer,
	"apply": func(_ *scenario, t *testing.T, d *datadriven.TestData) Input {
		p, err := plan.ParsePlan(strings.NewReader(d.Input), "plans/q.yaml")
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		return PlanApplied{State: p.State("plans/q.yaml", "h3"), Source: "plans/q.yaml"}
	},
	"edit": func(_ *scenario, t *testing.T, d *datadriven.TestData) Input {
		p, err := plan.ParsePlan(strings.NewReader(d.Input), "plans/p.yaml")
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		return PlanEdited{Plan: p, Hash: "h2"}
	},
	"triggers-queued": func(s *scenario, t *testing.T, d *datadriven.TestData) Input {
		in := TriggersQueued{Now: d.HasArg("now")}
		if v := argOr(d, "mtime", ""); v != "" {
			in.Modified = s.dur(t, d, v)
		}
		return in
	},
	"plan-writing": func(s *scenario, t *testing.T, d *datadriven.TestData) Input {
		return PlanWriting{Modified: s.dur(t, d, argOr(d, "mtime", "0s"))}
	},
	"shutdown":       func(*scenario, *testing.T, *datadriven.TestData) Input { return Shutdown{} },
	"inherited-gone": func(*scenario, *testing.T, *datadriven.TestData) Input { return InheritedGone{} },
}

// answer is a person's answer, to the gate ResolveGate finds as every face
// asks it; an answer the faces would refuse is fed all the same, for the
// machine's own check.
func (s *scenario) answer(t *testing.T, d *datadriven.TestData) Input {
	step := ""
	if ps := slices.DeleteFunc(paths(d), func(p string) bool { return p == "verbose" }); len(ps) > 0 {
		step = ps[0]
	}
	g, err := ResolveGate(s.m.State(), step)
	if err != nil {
		g = GateRef{Step: step}
	}
	a := &Answer{Approve: d.Cmd == "approve", Plan: g.Plan, By: argOr(d, "by", "alice"), Face: argOr(d, "face", "cli"),
		Note: strings.TrimSpace(d.Input)}
	return TriggersIn{Triggers: []Trigger{{Step: g.Step, From: a.Face, At: planspec.FormatISO(s.now), Answer: a}}}
}

func (s *scenario) exit(t *testing.T, d *datadriven.TestData) Input {
	id := d.CmdArgs[0].Key
	in := AgentExited{Step: id, Try: s.running[id]}
	if d.HasArg("try") {
		d.ScanArgs(t, "try", &in.Try)
	}
	in.Exit = Exit{Started: s.started[id], Ended: s.now, Stderr: strings.TrimSpace(d.Input)}
	if d.HasArg("result") {
		// The input is the result read from the agent's output (resultFrom: output).
		in.Result, in.Exit.Stderr = json.RawMessage(strings.TrimSpace(d.Input)), ""
	}
	if d.HasArg("code") {
		d.ScanArgs(t, "code", &in.Exit.Code)
	}
	in.Exit.TimedOut = d.HasArg("timeout")
	if d.HasArg("err") {
		in.Exit.Code, in.Exit.Err = -1, errors.New(strings.TrimSpace(d.Input))
	}
	if d.HasArg("failed") {
		in.AgentFailed = strings.TrimSpace(d.Input)
	}
	if v := argOr(d, "out", ""); v != "" {
		in.Exit.Stdout = v
	}
	if v := argOr(d, "session", ""); v != "" {
		in.Session = planspec.AgentSession{Agent: "claude", ID: v}
	}
	if a, ok := d.Arg("limit"); ok {
		l := Limit{Text: strings.TrimSpace(d.Input)}
		if len(a.Vals) > 0 {
			l.Reset = s.dur(t, d, a.Vals[0])
		}
		in.Limits = []Limit{l}
	}
	return in
}

// feed hands the machine one input and answers its writes and reads as a driver
// does, printing every effect.
func (s *scenario) feed(in Input, verbose bool) string {
	var b strings.Builder
	queue := s.m.Handle(s.now, in)
	for len(queue) > 0 {
		e := queue[0]
		queue = queue[1:]
		s.print(&b, e, verbose)
		switch e := e.(type) {
		case WriteState:
			if s.failWrite == nil {
				s.disk = e.State.Marshal()
			}
			queue = append(queue, s.m.Handle(s.now, Written{Err: s.failWrite})...)
		case ReadState:
			queue = append(queue, s.m.Handle(s.now, StateRead{Unchanged: true})...)
		case StartAgent:
			s.started[e.Step], s.running[e.Step] = s.now, e.Try
		case CommitWorktree:
			queue = append(queue, s.m.Handle(s.now, WorktreeCommitted{Step: e.Step, Try: e.Try, Branch: "stepseq/main/" + e.Step, Commit: "c-" + e.Step})...)
		case MergeWorktrees:
			in := WorktreesMerged{Join: e.Join, Steps: e.Steps}
			if s.w.mergeFail != "" {
				in.Err, in.Failed = errors.New(s.w.mergeFail), e.Steps[0]
			}
			queue = append(queue, s.m.Handle(s.now, in)...)
		case SetTimer:
			s.timer = e.At
		}
	}
	return b.String()
}

func (s *scenario) print(b *strings.Builder, e Effect, verbose bool) {
	switch e := e.(type) {
	case WriteState:
		s.printWrite(b, e)
	case ReadState:
		b.WriteString("read state\n")
	case StartAgent:
		printStart(b, e)
	case StopAgent:
		fmt.Fprintf(b, "stop %s#%d: %s\n", e.Step, e.Try, e.Reason)
	case Notify:
		printNote(b, e.Note)
	case SetWatch:
		if e.Delta {
			fmt.Fprintf(b, "watch +%v -%v\n", e.Added, e.Removed)
		} else {
			fmt.Fprintf(b, "watch %v trees=%v\n", e.Paths, e.Trees)
		}
	case SetTimer:
		fmt.Fprintf(b, "timer %s\n", rel(e.At))
	case JournalEntry:
		if verbose || !slices.Contains(scenarioRoutine, e.Entry.Event) {
			printEntry(b, e.Entry)
		}
	case Log:
		if verbose {
			fmt.Fprintf(b, "log %s %s %v\n", e.Level, e.Msg, e.Args)
		}
	case ReportVerdict:
		printVerdict(b, e)
	case WaitInherited:
		fmt.Fprintf(b, "wait for the inherited agent of %s\n", e.Step)
	case CommitWorktree:
		fmt.Fprintf(b, "commit %s#%d: %s\n", e.Step, e.Try, strings.ReplaceAll(e.Message, "\n", `\n`))
	case MergeWorktrees:
		fmt.Fprintf(b, "merge %v for %q\n", e.Branches, e.Join)
	case DrainTriggers:
		b.WriteString("drain the triggers\n")
	case IntakePlans:
		b.WriteString("take the plans in\n")
	default:
		fmt.Fprintf(b, "%T %+v\n", e, e)
	}
}

func (s *scenario) printWrite(b *strings.Builder, e WriteState) {
	fmt.Fprintf(b, "write (%s): %s cursor=%d", e.Reason, e.State.Status, e.State.CurrentStep)
	if s.failWrite != nil {
		fmt.Fprintf(b, " FAILS: %v\n", s.failWrite)
		return
	}
	b.WriteString("\n")
	s.runsChanged(b, e.State)
}

func printStart(b *strings.Builder, e StartAgent) {
	fmt.Fprintf(b, "start %s#%d", e.Step, e.Try)
	if e.Resumed {
		b.WriteString(" resumed")
	}
	if e.Resume.ID != "" {
		fmt.Fprintf(b, " resume=%s", e.Resume.ID)
	}
	if len(e.Changed) > 0 {
		fmt.Fprintf(b, " changed=%s", strings.Join(e.Changed, ","))
	}
	fmt.Fprintf(b, "\n  prompt: %s\n", e.Prompt)
}

func printNote(b *strings.Builder, n Notification) {
	who := "plan"
	if n.Step != "" {
		who = fmt.Sprintf("%s#%d", n.Step, n.Try)
	}
	fmt.Fprintf(b, "notify %s %s %s", who, n.Who, n.Status)
	if n.Event != "" {
		fmt.Fprintf(b, " event=%s", n.Event)
	}
	fmt.Fprintf(b, ": %s (next: %s)\n", n.Output, n.Next)
}

func printEntry(b *strings.Builder, j Entry) {
	fmt.Fprintf(b, "journal %s", j.Event)
	if j.Step != "" {
		fmt.Fprintf(b, " %s", j.Step)
		if j.Try > 0 {
			fmt.Fprintf(b, "#%d", j.Try)
		}
	}
	if j.Reason != "" {
		fmt.Fprintf(b, ": %s", j.Reason)
	}
	for _, k := range slices.Sorted(maps.Keys(j.Detail)) {
		fmt.Fprintf(b, " %s=%v", k, j.Detail[k])
	}
	b.WriteString("\n")
}

func printVerdict(b *strings.Builder, e ReportVerdict) {
	if e.Accepted {
		fmt.Fprintf(b, "verdict %s %s: accepted\n", e.Ref, e.Step)
		return
	}
	fmt.Fprintf(b, "verdict %s %s: refused\n", e.Ref, e.Step)
	for _, r := range e.Reasons {
		fmt.Fprintf(b, "  - %s\n", r)
	}
}

// runLine is what a write says of one run.
func runLine(run *planspec.StepRun) string {
	line := fmt.Sprintf("%s %s tries=%d", run.Status, orDash(run.Phase), run.Tries)
	if run.Skipped {
		line += " skipped"
	}
	if run.Error != nil {
		line += " error=" + strings.ReplaceAll(*run.Error, "\n", `\n`)
	}
	if run.Stdout != nil {
		line += " stdout=" + strings.ReplaceAll(*run.Stdout, "\n", `\n`)
	}
	if run.Agent != nil && run.Agent.Interruptions > 0 {
		line += fmt.Sprintf(" interruptions=%d", run.Agent.Interruptions)
	}
	if run.Agent != nil && run.Agent.Limit.UntilIso != "" {
		until, _ := planspec.ParseISO(run.Agent.Limit.UntilIso)
		line += " limited-until=" + rel(until)
	}
	if n := len(run.Reports); n > 0 {
		line += fmt.Sprintf(" reports=%d", n)
	}
	return line
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// runsChanged prints the runs and blockers a write changed.
func (s *scenario) runsChanged(b *strings.Builder, st *planspec.State) {
	for _, id := range st.StepQueue {
		run, ok := st.StepRuns[id]
		if !ok {
			continue
		}
		line := runLine(run)
		if s.last[id] != line {
			fmt.Fprintf(b, "  %s: %s\n", id, line)
			s.last[id] = line
		}
	}
	if !slices.Equal(s.lastBlk, st.Blockers) {
		fmt.Fprintf(b, "  blockers: %q\n", st.Blockers)
		s.lastBlk = slices.Clone(st.Blockers)
	}
}

func (s *scenario) status() string {
	var b strings.Builder
	st := s.m.State()
	if st == nil {
		b.WriteString("no state\n")
	} else {
		fmt.Fprintf(&b, "%s cursor=%d\n", st.Status, st.CurrentStep)
		for _, id := range st.StepQueue {
			if run, ok := st.StepRuns[id]; ok {
				fmt.Fprintf(&b, "  %s: %s\n", id, runLine(run))
			}
		}
		if len(st.Blockers) > 0 {
			fmt.Fprintf(&b, "  blockers: %q\n", st.Blockers)
		}
		if len(st.Artifacts) > 0 {
			fmt.Fprintf(&b, "  artifacts: %q\n", st.Artifacts)
		}
		if st.LastHeartbeatIso != "" {
			at, _ := planspec.ParseISO(st.LastHeartbeatIso)
			fmt.Fprintf(&b, "  lastHeartbeat: %s\n", rel(at))
		}
	}
	d := s.m.Decision()
	fmt.Fprintf(&b, "decision: %s %s (%s)\n", d.Action, d.Step, d.Reason)
	var flags []string
	for name, on := range map[string]bool{"busy": s.m.Busy(), "done": s.m.Done(), "blocked": s.m.Blocked(), "settled": s.m.Settled()} {
		if on {
			flags = append(flags, name)
		}
	}
	slices.Sort(flags)
	fmt.Fprintf(&b, "machine: %s\n", strings.Join(flags, " "))
	if err := s.m.Err(); err != nil {
		fmt.Fprintf(&b, "err: %v\n", err)
	}
	return b.String()
}
