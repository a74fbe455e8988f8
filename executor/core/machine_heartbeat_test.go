package core

import (
	"strings"
	"testing"
	"time"

	"github.com/stepseq/stepseq/planspec"
)

// clockProbe answers the machine's questions for a plan with no conditions and
// no outputs: nothing is missing, every agent can launch, and the agent never
// wrote a byte.
type clockProbe struct{}

func (clockProbe) Conditions(*planspec.State) (CondSet, error)            { return noConds{}, nil }
func (clockProbe) Missing([]string) []string                              { return nil }
func (clockProbe) ModTime(string) (time.Time, bool)                       { return time.Time{}, false }
func (clockProbe) Orphan(string, int, string) TryState                    { return TryState{} }
func (clockProbe) CanLaunch(*planspec.State, string) error                { return nil }
func (clockProbe) LastOutput() time.Time                                  { return time.Time{} }
func (clockProbe) WatchSet(*planspec.State, CondSet) ([]string, []string) { return nil, nil }
func (clockProbe) ReportsDir(id string) string                            { return reportsRel(id) }

type noConds struct{}

func (noConds) Cond(_ time.Time, _, kind string) (bool, error) { return kind == "when", nil }
func (noConds) Check(time.Time, string) func() (bool, error)   { return nil }
func (noConds) Reads(string) ([]string, []string, bool)        { return nil, nil, false }

// clockDriver carries out a machine's effects on an injected clock: writes
// succeed, the timer is remembered, notifications are kept.
type clockDriver struct {
	t     *testing.T
	m     *Machine
	now   time.Time
	timer time.Time
	notes []Notification
	queue []Effect
}

func (d *clockDriver) feed(in Input) {
	d.queue = append(d.queue, d.m.Handle(d.now, in)...)
	for len(d.queue) > 0 {
		e := d.queue[0]
		d.queue = d.queue[1:]
		switch e := e.(type) {
		case WriteState:
			d.queue = append(d.queue, d.m.Handle(d.now, Written{})...)
		case SetTimer:
			d.timer = e.At
		case Notify:
			d.notes = append(d.notes, e.Note)
		}
	}
}

// advance moves the clock to the timer the machine set and fires it.
func (d *clockDriver) advance() {
	d.t.Helper()
	if d.timer.IsZero() {
		d.t.Fatalf("no timer set at %s; notes %+v", d.now, d.notes)
	}
	d.now = d.timer
	d.timer = time.Time{}
	d.feed(TimerFired{})
}

func (d *clockDriver) statuses() []string {
	var out []string
	for _, n := range d.notes {
		out = append(out, n.Status)
	}
	return out
}

// TestMachine_Heartbeat: while a step's agent runs and nothing happens, the user
// hears a heartbeat every `heartbeat` (5m by default), on the machine's own
// timer; a report resets the count. The clock is injected: no test waits.
func TestMachine_Heartbeat(t *testing.T) {
	const state = `{"plan":{"steps":{"long":{"title":"Long","instruction":"work"}}},
		"stepQueue":["long"],"currentStep":0,"stepRuns":{},"stepDelayMinutes":0,
		"blockers":[],"artifacts":[],"status":"IN_PROGRESS","stepseq":{"name":"hb"}}`
	st, err := planspec.ParseState(strings.NewReader(state), "state.json")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	d := &clockDriver{t: t, now: start}
	d.m = NewMachine(MachineConfig{Driver: "watch", MaxRetries: 3, Persistent: true, Probe: clockProbe{}})
	d.feed(StateRead{State: st})
	if got := d.statuses(); len(got) != 1 || got[0] != "dispatching" {
		t.Fatalf("after the launch the user heard %v, want [dispatching]", got)
	}
	for i := 1; i <= 3; i++ {
		d.advance()
		if got, want := d.now.Sub(start), time.Duration(i)*DefaultHeartbeat; got != want {
			t.Fatalf("heartbeat %d at +%s, want +%s", i, got, want)
		}
		n := d.notes[len(d.notes)-1]
		if n.Status != "heartbeat" || n.Step != "long" || n.Try != 1 || n.Plan != "hb" {
			t.Fatalf("heartbeat %d: %+v", i, n)
		}
	}
	if got := len(d.notes); got != 4 {
		t.Fatalf("%d notifications after three heartbeats: %v", got, d.statuses())
	}

	// Something new (a milestone report) puts the next heartbeat 5m after it.
	d.now = d.now.Add(2 * time.Minute)
	d.feed(ReportIn{Step: "long", Via: "cli", Report: planspec.WorkerReport{Status: planspec.ReportAccepted,
		Summary: "on it", Evidence: "started", Risk: "none", Next: "write"}})
	reported := d.now
	if last := d.notes[len(d.notes)-1]; last.Status == "heartbeat" {
		t.Fatalf("the report was not told: %v", d.statuses())
	}
	d.advance()
	if got := d.now.Sub(reported); got != DefaultHeartbeat {
		t.Fatalf("the heartbeat after a report came %s after it, want %s", got, DefaultHeartbeat)
	}
	if last := d.notes[len(d.notes)-1]; last.Status != "heartbeat" {
		t.Fatalf("last notification %+v, want a heartbeat", last)
	}

	// The agent's end stops the heartbeats: no timer fires one after it.
	before := len(d.notes)
	d.feed(AgentExited{Step: "long", Try: 1, Exit: Exit{Code: 0, Started: start, Ended: d.now}})
	for i := 0; i < 3 && !d.timer.IsZero(); i++ {
		d.advance()
	}
	for _, n := range d.notes[before:] {
		if n.Status == "heartbeat" {
			t.Fatalf("a heartbeat after the agent ended: %v", d.statuses())
		}
	}
}
