package notify

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor"
	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/planspec"
)

// writePlanState writes the state of a plan that notifies hook (none when "").
func writePlanState(t *testing.T, path, name, hook string) {
	t.Helper()
	src := "name: " + name + "\n"
	if hook != "" {
		src += "notify:\n  - webhook: " + hook + "\n"
	}
	src += "steps:\n  - id: a\n    title: A\n    instruction: do a\n"
	p, err := planspec.ParsePlan(strings.NewReader(src), name+".yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := (&executor.StateFile{Path: path}).Write(p.State("plans/"+name+".yaml", "")); err != nil {
		t.Fatal(err)
	}
}

// TestFollower_PlanSinks: the follower's sinks are the active plan's: a new plan
// with another webhook gets the reports from its first one on; the old webhook
// gets none after the switch, and the notification carries the machine's fields.
func TestFollower_PlanSinks(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	first, second := newHook(t), newHook(t)
	writePlanState(t, state, "first", first.srv.URL)
	f, err := NewFollower(Config{Dir: dir, Logger: testLogger(t), Retry: quickRetry}, state)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(0)
	note := core.Notification{Time: time.Now(), Plan: "first", Step: "a", Try: 1, Who: "stepseq", Status: "dispatching", Output: "agent launched", Next: "wait"}
	f.Notify(note)
	eventually(t, "the first plan's webhook", func() bool { return len(first.received()) == 1 })

	writePlanState(t, state, "second", second.srv.URL)
	note.Plan = "second"
	f.Notify(note)
	note.Status = "done"
	f.Notify(note)
	eventually(t, "the second plan's webhook", func() bool { return len(second.received()) == 2 })
	if got := first.received(); len(got) != 1 {
		t.Errorf("the first plan's webhook got %d reports, want 1", len(got))
	}
	// The feed is a sink of its own, which may write after the webhook has had
	// its reports.
	var feed []Report
	eventually(t, "three reports in the feed", func() bool {
		var err error
		feed, err = Recent(dir, 10)
		return err == nil && len(feed) == 3
	})
	if !slices.Equal(second.received(), []string{feed[1].ID, feed[2].ID}) {
		t.Errorf("the second webhook got %v, the feed's last two are %s %s", second.received(), feed[1].ID, feed[2].ID)
	}
	if r := feed[2]; r.Plan != "second" || r.Step != "a" || r.Try != 1 || r.Who != "stepseq" || r.Status != "done" || r.Output != "agent launched" || r.Next != "wait" {
		t.Errorf("the report is %+v", r)
	}
}

// TestFollower_AllowPlanCommand: with --allow-agent, a plan's notify command
// the list does not hold is left out of the sinks; webhooks and the command
// line's own sinks stay.
func TestFollower_AllowPlanCommand(t *testing.T) {
	f := &Follower{cfg: Config{Sinks: []SinkConfig{{Command: []string{"operator-cmd"}}},
		AllowPlanCommand: func(argv []string) bool { return argv[0] == "listed" }},
		plan: []planspec.NotifySink{{Command: []string{"evil"}}, {Command: []string{"listed"}}, {Webhook: "https://ntfy.sh/x"}}}
	var got []string
	for _, s := range f.config().Sinks {
		got = append(got, strings.Join(s.Command, " ")+s.Webhook)
	}
	if want := "operator-cmd listed https://ntfy.sh/x"; strings.Join(got, " ") != want {
		t.Fatalf("sinks = %q, want %q", got, want)
	}
}
