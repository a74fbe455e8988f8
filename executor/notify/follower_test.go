package notify

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
	"github.com/stepseq/stepseq/planspec/plan"
)

// planYAML is a one-step plan named name whose notify: list is sinks.
func planYAML(name string, sinks ...planspec.NotifySink) string {
	src := "name: " + name + "\n"
	if len(sinks) > 0 {
		b, _ := json.Marshal(sinks) // JSON is YAML's flow style
		src += "notify: " + string(b) + "\n"
	}
	return src + "steps:\n  - id: a\n    title: A\n    instruction: do a\n"
}

// writePlanState writes the state of the plan named name, notifying sinks.
func writePlanState(t *testing.T, path, name string, sinks ...planspec.NotifySink) {
	t.Helper()
	p, err := plan.ParsePlan(strings.NewReader(planYAML(name, sinks...)), name+".yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := (&store.StateFile{Path: path}).Write(p.State("plans/"+name+".yaml", "")); err != nil {
		t.Fatal(err)
	}
}

// followPlan opens a follower on a new workspace whose state.json holds the plan
// named name, notifying sinks. It is closed when the test ends.
func followPlan(t *testing.T, name string, sinks ...planspec.NotifySink) (f *Follower, dir string) {
	t.Helper()
	dir = t.TempDir()
	state := filepath.Join(dir, "state.json")
	writePlanState(t, state, name, sinks...)
	f, err := NewFollower(Config{Dir: dir, Logger: testLogger(t), Retry: quickRetry}, state)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close(0) })
	return f, dir
}

func webhookSink(url string) planspec.NotifySink { return planspec.NotifySink{Webhook: url} }

func commandSink(argv []string) planspec.NotifySink { return planspec.NotifySink{Command: argv} }

// recordedReports are the reports the record helper wrote to path.
func recordedReports(t *testing.T, path string) []Notice {
	t.Helper()
	var out []Notice
	for _, rec := range readRecords(t, path) {
		var r Notice
		if err := json.Unmarshal([]byte(rec.Stdin), &r); err != nil {
			t.Fatalf("stdin %q: %v", rec.Stdin, err)
		}
		if rec.Env["STEPSEQ_NOTIFY_RUN"] != r.Run {
			t.Errorf("STEPSEQ_NOTIFY_RUN=%q for a report of run %q", rec.Env["STEPSEQ_NOTIFY_RUN"], r.Run)
		}
		out = append(out, r)
	}
	return out
}

// hasPlanDone says whether run's plan_done is among reports.
func hasPlanDone(reports []Notice, run string) bool {
	return slices.ContainsFunc(reports, func(r Notice) bool { return r.Run == run && r.Event == core.EventPlanDone })
}

// runsOf are the runs reports are of, each once, in order of first report.
func runsOf(reports []Notice) []string {
	var runs []string
	for _, r := range reports {
		if !slices.Contains(runs, r.Run) {
			runs = append(runs, r.Run)
		}
	}
	return runs
}

// TestFollower_PlanSinks: the sinks are those of the plan the notification is
// about: a new plan in state.json with another webhook gets the reports from
// its first one on, and the old webhook none of them; the old plan's report
// still undelivered at the switch reaches the old webhook once it is back.
func TestFollower_PlanSinks(t *testing.T) {
	first, second := newHook(t), newHook(t)
	f, dir := followPlan(t, "first", webhookSink(first.srv.URL))
	first.down.Store(true)
	note := core.Notification{Time: time.Now(), Plan: "first", Step: "a", Try: 1, Who: "stepseq", Status: "done", Event: core.EventPlanDone,
		Output: "agent launched", Next: "none", Sinks: []planspec.NotifySink{webhookSink(first.srv.URL)}}
	f.Notify(note)
	eventually(t, "the first plan's webhook tried", func() bool { return first.requests.Load() > 0 })

	note.Plan, note.Event, note.Next = "second", "", "wait"
	note.Sinks = []planspec.NotifySink{webhookSink(second.srv.URL)}
	note.Status = "dispatching"
	f.Notify(note)
	note.Status = "done"
	f.Notify(note)
	eventually(t, "the second plan's webhook", func() bool { return len(second.received()) == 2 })
	first.down.Store(false)
	// The feed is a sink of its own, which may write after the webhooks.
	var feed []Notice
	eventually(t, "three reports in the feed", func() bool {
		var err error
		feed, err = Recent(dir, 10)
		return err == nil && len(feed) == 3
	})
	eventually(t, "the first plan's last report at its webhook", func() bool { return len(first.received()) > 0 })
	if err := f.Close(effectWait); err != nil {
		t.Fatal(err)
	}
	if got := firstSeen(first.received()); !slices.Equal(got, []string{feed[0].ID}) {
		t.Errorf("the first plan's webhook got %v, want its plan's report %s only", got, feed[0].ID)
	}
	if !slices.Equal(second.received(), []string{feed[1].ID, feed[2].ID}) {
		t.Errorf("the second webhook got %v, the feed's last two are %s %s", second.received(), feed[1].ID, feed[2].ID)
	}
	if r := feed[2]; r.Plan != "second" || r.Step != "a" || r.Try != 1 || r.Who != "stepseq" || r.Status != "done" || r.Output != "agent launched" || r.Next != "wait" {
		t.Errorf("the report is %+v", r)
	}
}

// TestFollower_ReadsNoStateFile: once open, the follower takes the plan's
// sinks from the notifications: a state file that says otherwise, or says
// nothing readable, changes nothing.
func TestFollower_ReadsNoStateFile(t *testing.T) {
	listed, inFile := newHook(t), newHook(t)
	f, dir := followPlan(t, "p", webhookSink(listed.srv.URL))
	state := filepath.Join(dir, "state.json")
	note := core.Notification{Time: time.Now(), Plan: "p", Step: "a", Try: 1, Who: "stepseq", Status: "dispatching",
		Sinks: []planspec.NotifySink{webhookSink(listed.srv.URL)}}
	f.Notify(note)
	// Each state write would have had the follower parse the file again.
	writePlanState(t, state, "p", webhookSink(inFile.srv.URL))
	f.Notify(note)
	if err := os.WriteFile(state, []byte("{not a state"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.Notify(note)
	eventually(t, "the plan's webhook", func() bool { return len(listed.received()) == 3 })
	if err := f.Close(effectWait); err != nil {
		t.Fatal(err)
	}
	if got := inFile.requests.Load(); got != 0 {
		t.Errorf("the webhook only the file names got %d requests", got)
	}
}

// TestFollower_AllowPlanCommand: with --allow-agent, a plan's notify command
// the list does not hold is left out of the sinks; webhooks stay.
func TestFollower_AllowPlanCommand(t *testing.T) {
	f := &Follower{cfg: Config{AllowPlanCommand: func(argv []string) bool { return argv[0] == "listed" }}}
	var got []string
	for _, s := range f.allowed([]planspec.NotifySink{{Command: []string{"evil"}}, {Command: []string{"listed"}}, {Webhook: "https://ntfy.sh/x"}}, false) {
		got = append(got, strings.Join(s.Command, " ")+s.Webhook)
	}
	if want := "listed https://ntfy.sh/x"; strings.Join(got, " ") != want {
		t.Fatalf("sinks = %q, want %q", got, want)
	}
}

// TestFollower_RunSharesASink: a sink two runs list is one sink, with one
// cursor, delivering both runs' reports; a sink only the other run lists hears
// none of the first's.
func TestFollower_RunSharesASink(t *testing.T) {
	shared, own := newHook(t), newHook(t)
	f, dir := followPlan(t, "p", webhookSink(shared.srv.URL))
	before := f.Notifier()
	f.Notify(core.Notification{Plan: "p", Status: "dispatching", Sinks: []planspec.NotifySink{webhookSink(shared.srv.URL)}})
	f.Notify(core.Notification{Plan: "q", Run: "q", Status: "dispatching", Sinks: []planspec.NotifySink{webhookSink(shared.srv.URL)}})
	if f.Notifier() != before {
		t.Error("a run listing a sink already open re-opened the notifier")
	}
	f.Notify(core.Notification{Plan: "r", Run: "r", Status: "dispatching", Sinks: []planspec.NotifySink{webhookSink(shared.srv.URL), webhookSink(own.srv.URL)}})
	f.Notify(core.Notification{Plan: "p", Status: "done", Sinks: []planspec.NotifySink{webhookSink(shared.srv.URL)}})
	eventually(t, "four reports at the shared webhook", func() bool { return len(shared.received()) == 4 })
	eventually(t, "r's report at its own webhook", func() bool { return len(own.received()) == 1 })
	if err := f.Close(effectWait); err != nil {
		t.Fatal(err)
	}
	feed, err := Recent(dir, 10)
	if err != nil || len(feed) != 4 {
		t.Fatalf("feed %v, %v", feed, err)
	}
	var ids []string
	for _, r := range feed {
		ids = append(ids, r.ID)
	}
	if got := shared.received(); !slices.Equal(got, ids) {
		t.Errorf("the shared webhook got %v, want every report once, in order: %v", got, ids)
	}
	if got := own.received(); !slices.Equal(got, []string{feed[2].ID}) {
		t.Errorf("r's own webhook got %v, want r's report %s only", got, feed[2].ID)
	}
}

// TestFollower_RestartKeepsRunSinks: a run's sink that had not delivered its
// reports when the sidecar stopped delivers them after a restart, whether the
// run still has its state file or was closed meanwhile: the follower's start
// reads each run's plan, not state.json's only.
func TestFollower_RestartKeepsRunSinks(t *testing.T) {
	for _, closed := range []bool{false, true} {
		name := "live"
		if closed {
			name = "closed"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			state := filepath.Join(dir, "state.json")
			tmp := t.TempDir()
			out, gate := filepath.Join(tmp, "records.jsonl"), filepath.Join(tmp, "gate")
			sink := commandSink(helperArgv("record", out, gate))
			writePlanState(t, state, "main")
			ws := store.Workspace{Dir: dir}.ForRun("x")
			writePlanState(t, ws.State, "x", sink)
			cfg := Config{Dir: dir, Logger: testLogger(t), Retry: quickRetry}
			f, err := NewFollower(cfg, state)
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range []string{"dispatching", "done"} {
				f.Notify(core.Notification{Plan: "x", Run: "x", Step: "a", Try: 1, Status: st, Sinks: []planspec.NotifySink{sink}})
			}
			f.Notify(core.Notification{Plan: "x", Run: "x", Status: "done", Event: core.EventPlanDone, Sinks: []planspec.NotifySink{sink}})
			f.Notify(core.Notification{Plan: "main", Status: "dispatching", Sinks: []planspec.NotifySink{}})
			if err := f.Close(0); err != nil {
				t.Fatal(err)
			}
			if closed {
				if _, err := (engine.Commands{WS: store.Workspace{Dir: dir}, Grace: time.Second}).Close(context.Background(), "x"); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			f, err = NewFollower(cfg, state)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close(0)
			eventually(t, "x's reports at x's sink", func() bool { return len(recordedReports(t, out)) >= 3 })
			if closed {
				// Its backlog delivered, a closed run's sink goes once the
				// notifier is re-opened for other sinks, its cursor with it.
				id := PlanSinks([]planspec.NotifySink{sink})[0].id()
				eventually(t, "x's sink past the backlog", func() bool { return f.Notifier().ob.pending(id) == 0 })
				h := newHook(t)
				f.Notify(core.Notification{Plan: "main", Status: "milestone", Sinks: []planspec.NotifySink{webhookSink(h.srv.URL)}})
				eventually(t, "main's new webhook", func() bool { return len(h.received()) == 1 })
				if _, err := os.Stat(filepath.Join(dir, ".stepseq", "outbox", id+cursorSuffix)); !os.IsNotExist(err) {
					t.Errorf("the closed run's sink kept its cursor: %v", err)
				}
			}
			if err := f.Close(effectWait); err != nil {
				t.Fatal(err)
			}
			got := recordedReports(t, out)
			if runs := runsOf(got); !slices.Equal(runs, []string{"x"}) || !hasPlanDone(got, "x") || len(firstSeenReports(got)) != 3 {
				t.Errorf("x's sink got %d reports of runs %q, want x's 3 with its plan_done", len(got), runs)
			}
		})
	}
}

func firstSeenReports(rs []Notice) []string {
	var ids []string
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	return firstSeen(ids)
}

// notes is the sidecar's notifier, opened once the sidecar holds the
// workspace lock, as watch opens it.
type notes struct{ *Follower }

// TestSidecar_RunsNotifyTheirPlansSinks: a real sidecar drives state.json's
// plan and a run started beside it, each plan with a command sink of its own.
// Each plan's sink gets its own run's reports and none of the other's; the
// command line's sink gets both.
func TestSidecar_RunsNotifyTheirPlansSinks(t *testing.T) {
	t.Setenv("STEP_AGENT_CMD", "true")
	ws := t.TempDir()
	tmp := t.TempDir()
	mainOut, runOut, allOut := filepath.Join(tmp, "main.jsonl"), filepath.Join(tmp, "run.jsonl"), filepath.Join(tmp, "all.jsonl")
	if err := os.MkdirAll(filepath.Join(ws, "plans"), 0o755); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(ws, "state.json")
	rt, err := engine.NewRuntime(state, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	n := &notes{}
	sc, err := engine.NewSidecar(rt, engine.SidecarOptions{PlansDir: filepath.Join(ws, "plans"), Notifier: n})
	if err != nil {
		t.Fatal(err)
	}
	n.Follower, err = NewFollower(Config{Dir: ws, Logger: testLogger(t), Sinks: []SinkConfig{{Command: helperArgv("record", allOut)}}}, state)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	}
	defer stop()

	if err := os.WriteFile(filepath.Join(ws, "plans", "main.yaml"), []byte(planYAML("main", commandSink(helperArgv("record", mainOut)))), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the main plan done at its sink", func() bool { return hasPlanDone(recordedReports(t, mainOut), "") })
	planPath := filepath.Join(tmp, "side.yaml")
	if err := os.WriteFile(planPath, []byte(planYAML("side", commandSink(helperArgv("record", runOut)))), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.StartRun(engine.RunStart{Plan: engine.ReadPlanFile(planPath, "side.yaml"), Name: "side"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run's plan done at its sink", func() bool { return hasPlanDone(recordedReports(t, runOut), "side") })
	stop()
	if err := n.Close(effectWait); err != nil {
		t.Fatal(err)
	}

	mainGot, runGot, allGot := recordedReports(t, mainOut), recordedReports(t, runOut), recordedReports(t, allOut)
	if runs := runsOf(mainGot); !slices.Equal(runs, []string{""}) {
		t.Errorf("the main plan's sink got reports of runs %q, want state.json's only", runs)
	}
	if runs := runsOf(runGot); !slices.Equal(runs, []string{"side"}) {
		t.Errorf("the run's sink got reports of runs %q, want side's only", runs)
	}
	if !hasPlanDone(allGot, "") || !hasPlanDone(allGot, "side") {
		t.Errorf("the command line's sink got reports of runs %q, want both plans done", runsOf(allGot))
	}
	// Each report reached the command line's sink and its own plan's.
	all := firstSeenReports(allGot)
	if got := append(firstSeenReports(mainGot), firstSeenReports(runGot)...); len(got) != len(all) {
		t.Errorf("the plans' sinks got %d reports between them, the command line's %d", len(got), len(all))
	}
}

// TestFollower_ReopenKeepsWhatIsHeld: a held follower whose notifier is
// reopened within an input (a plan's sinks change) keeps the reports of that
// input from every sink until Publish, those emitted before the reopen too.
func TestFollower_ReopenKeepsWhatIsHeld(t *testing.T) {
	hook := newHook(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	writePlanState(t, state, "first")
	f, err := NewFollower(Config{Dir: dir, Logger: testLogger(t), Retry: quickRetry, HoldUntilPublished: true}, state)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close(0) })
	note := core.Notification{Time: time.Now(), Plan: "first", Step: "a", Try: 1, Who: "stepseq", Status: "dispatching", Output: "agent launched"}
	f.Notify(note)
	note.Status, note.Sinks = "done", []planspec.NotifySink{webhookSink(hook.srv.URL)}
	f.Notify(note) // the plan's sinks change: the notifier is reopened
	n := f.Notifier()
	for _, s := range n.sinks {
		if _, _, _, _, due, err := n.ob.locate(s.id, new(uint64)); err != nil || due {
			t.Fatalf("sink %s: a report is due before Publish, across the reopen (err %v)", s.id, err)
		}
	}
	f.Publish()
	eventually(t, "both reports in the feed", func() bool {
		feed, err := Recent(dir, 10)
		return err == nil && len(feed) == 2
	})
}
