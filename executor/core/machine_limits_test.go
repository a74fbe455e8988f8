package core

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stepseq/stepseq/planspec"
)

// limited is the exit of a try whose every agent was out of quota.
func limited(try int, now time.Time, reset time.Time) AgentExited {
	text := "claude: You've hit your 5-hour limit"
	return AgentExited{Step: "a", Try: try, Exit: Exit{Code: 1, Started: now, Ended: now}, AgentFailed: text,
		Limits: []Limit{{Reset: reset, Text: text}}}
}

// limitNotes are the waiting_limit notifications among effs.
func limitNotes(effs []Effect) []Notification {
	var out []Notification
	for _, e := range effs {
		if n, ok := e.(Notify); ok && n.Note.Event == EventWaitingLimit {
			out = append(out, n.Note)
		}
	}
	return out
}

// A limit with a stated reset: the same try runs again at that time and not
// before, no try is spent, and the user hears of the wait once at its start and
// once at its end.
func TestMachine_LimitStatedReset(t *testing.T) {
	r := newRig(t, planAB(""), true)
	if s, ok := started(r.take()); !ok || s.Try != 1 {
		t.Fatalf("start %+v", s)
	}
	reset := t0.Add(3 * time.Second)
	r.feed(limited(1, r.now, reset))
	effs := r.take()
	run := r.run("a")
	if run.Status != planspec.StatusPending || run.Tries != 0 || run.Phase != planspec.PhaseWaiting || run.Error != nil {
		t.Fatalf("run after the limit: %s tries %d phase %s error %v", run.Status, run.Tries, run.Phase, run.Error)
	}
	if at, ok := timerAt(effs); !ok || !at.Equal(reset) {
		t.Fatalf("timer %v %v, want the reset %v", at, ok, reset)
	}
	if n := limitNotes(effs); len(n) != 1 || n[0].Status != planspec.ReportMilestone || !strings.Contains(n[0].Output, "waiting until") {
		t.Fatalf("notes at the start %+v", n)
	}
	if d := r.m.Decision(); d.Action != LimitWaiting || !d.At.Equal(reset) {
		t.Fatalf("decision %+v", d)
	}
	// Anything before the reset launches nothing.
	r.at(2 * time.Second)
	r.feed(FilesChanged{Paths: []string{"notes.md"}})
	r.feed(TimerFired{})
	if _, ok := started(r.take()); ok {
		t.Fatal("launched before the reset")
	}
	r.at(3 * time.Second)
	r.feed(TimerFired{})
	s, ok := started(r.take())
	if !ok || s.Try != 1 || s.Prompt != "do a" {
		t.Fatalf("start at the reset %+v %v: want try 1 again with its instruction", s, ok)
	}
	// It gets past the limit: the end of the wait is told, once.
	r.feed(AgentExited{Step: "a", Try: 1, Exit: Exit{Code: 0, Started: r.now, Ended: r.now}})
	effs = r.take()
	if n := limitNotes(effs); len(n) != 1 || !strings.Contains(n[0].Output, "usage limit over") {
		t.Fatalf("notes at the end %+v", n)
	}
	if run := r.run("a"); run.Status != planspec.StatusDone || run.Tries != 1 || run.Agent.Limit != (planspec.LimitHold{}) {
		t.Fatalf("run after the wait: %s tries %d limit %+v", run.Status, run.Tries, run.Agent.Limit)
	}
}

// A retry held by a limit runs again as the same retry: its count and its
// troubleshoot prompt.
func TestMachine_LimitKeepsTheRetrysPrompt(t *testing.T) {
	r := newRig(t, planAB(""), true)
	r.take()
	r.feed(AgentExited{Step: "a", Try: 1, Exit: Exit{Code: 1, Stderr: "boom"}})
	s, _ := started(r.take())
	if s.Try != 2 {
		t.Fatalf("retry %+v", s)
	}
	prompt := s.Prompt
	r.feed(limited(2, r.now, r.now.Add(time.Minute)))
	r.take()
	if run := r.run("a"); run.Tries != 1 || run.Error == nil || *run.Error != "boom" {
		t.Fatalf("held retry: tries %d error %v", run.Tries, run.Error)
	}
	r.at(time.Minute)
	r.feed(TimerFired{})
	if s, _ := started(r.take()); s.Try != 2 || s.Prompt != prompt {
		t.Fatalf("again %+v, want try 2 with %q", s, prompt)
	}
}

// No stated time: the waits back off from 1 minute, doubling to 30, on the
// machine's clock, for at most limitWait; then the try fails with the limit as
// its error, and the user hears the end.
func TestMachine_LimitBackoff(t *testing.T) {
	r := newRig(t, planAB(`,"stepseq":{"limitWait":"2h"}`), true)
	r.take()
	var waits []time.Duration
	start := r.now
	for i := 0; i < 20; i++ {
		r.feed(limited(1, r.now, time.Time{}))
		effs := r.take()
		run := r.run("a")
		if run.Phase != planspec.PhaseWaiting {
			// Try 1 failed with the limit; try 2 starts by the usual rules.
			if s, _ := started(effs); s.Try != 2 || !strings.Contains(failedWith(run, 1), "still limited after limitWait 2h0m0s") {
				t.Fatalf("after the waits: start %+v, try 1 ended with %q", s, failedWith(run, 1))
			}
			if n := limitNotes(effs); len(n) != 1 || !strings.Contains(n[0].Output, "outlasted limitWait 2h0m0s") {
				t.Errorf("end notes %+v", n)
			}
			break
		}
		if n := limitNotes(effs); len(n) != map[bool]int{true: 1, false: 0}[i == 0] {
			t.Fatalf("wait %d: notes %+v: the start is told once", i, n)
		}
		at, ok := timerAt(effs)
		if !ok {
			t.Fatalf("wait %d: no timer", i)
		}
		waits = append(waits, at.Sub(r.now))
		r.now = at
		r.feed(TimerFired{})
		if s, ok := started(r.take()); !ok || s.Try != 1 {
			t.Fatalf("wait %d: start %+v", i, s)
		}
	}
	m := time.Minute
	want := []time.Duration{m, 2 * m, 4 * m, 8 * m, 16 * m, 30 * m, 30 * m, 29 * m} // the last ends with the 2h
	if !slices.Equal(waits, want) {
		t.Errorf("waits %v, want %v", waits, want)
	}
	if got := r.now.Sub(start); got != 2*time.Hour {
		t.Errorf("waited %v, want limitWait", got)
	}
}

// A stated reset past limitWait fails the try at once: waiting would not help.
func TestMachine_LimitPastLimitWait(t *testing.T) {
	r := newRig(t, planAB(`,"stepseq":{"limitWait":"1h"}`), true)
	r.take()
	r.feed(limited(1, r.now, r.now.Add(3*24*time.Hour)))
	if run := r.run("a"); run.Phase == planspec.PhaseWaiting || !strings.Contains(failedWith(run, 1), "past limitWait 1h0m0s") {
		t.Fatalf("run %s, try 1 ended with %q", run.Phase, failedWith(run, 1))
	}
}

// A restart during the wait (a new machine reading the state on disk) waits for
// the same time, and tells the user nothing new.
func TestMachine_LimitSurvivesRestart(t *testing.T) {
	r := newRig(t, planAB(""), true)
	r.take()
	reset := t0.Add(90 * time.Second)
	r.feed(limited(1, r.now, reset))
	r.take()
	r.at(10 * time.Second)
	again := newRig(t, string(r.disk), true)
	again.now = r.now
	again.feed(StateRead{State: parse(t, string(r.disk))})
	effs := again.take()
	if _, ok := started(effs); ok {
		t.Fatal("the restart launched before the reset")
	}
	if len(limitNotes(effs)) != 0 {
		t.Errorf("the restart told the wait again: %+v", limitNotes(effs))
	}
	if at, ok := timerAt(effs); !ok || !at.Equal(reset) {
		t.Fatalf("timer after the restart %v %v, want %v", at, ok, reset)
	}
	again.now = reset
	again.feed(TimerFired{})
	if s, ok := started(again.take()); !ok || s.Try != 1 {
		t.Fatalf("start after the restart's wait %+v", s)
	}
}

// check under a heartbeat (a one-shot machine) leaves a waiting step alone until
// its time, and settles at once rather than sleeping through the wait.
func TestMachine_CheckDuringLimit(t *testing.T) {
	r := newRig(t, planAB(""), true)
	r.take()
	reset := t0.Add(time.Hour)
	r.feed(limited(1, r.now, reset))
	r.at(5 * time.Minute)
	check := newRig(t, string(r.disk), false)
	check.now = r.now
	check.feed(StateRead{State: parse(t, string(r.disk))})
	if _, ok := started(check.take()); ok {
		t.Fatal("check launched during the wait")
	}
	if !check.m.Settled() || check.m.Err() != nil {
		t.Fatalf("check settled %v err %v", check.m.Settled(), check.m.Err())
	}
	late := newRig(t, string(r.disk), false)
	late.now = reset
	late.feed(StateRead{State: parse(t, string(r.disk))})
	if s, ok := started(late.take()); !ok || s.Try != 1 {
		t.Fatalf("check after the reset: start %+v", s)
	}
}

// resume: true keeps the session the agent named and a retry continues it; a
// first try, or a step without resume, starts afresh.
func TestMachine_ResumeSession(t *testing.T) {
	session := planspec.AgentSession{Agent: "claude", ID: "0b6c"}
	for _, tc := range []struct {
		name, extra string
		session     planspec.AgentSession
		want        planspec.AgentSession
	}{
		{"resume", `,"stepseq":{"resume":true}`, session, session},
		{"no resume", "", session, planspec.AgentSession{}},
		{"no session named", `,"stepseq":{"resume":true}`, planspec.AgentSession{}, planspec.AgentSession{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, planAB(tc.extra), true)
			if s, _ := started(r.take()); s.Resume != (planspec.AgentSession{}) {
				t.Fatalf("first try resumes %+v", s.Resume)
			}
			r.feed(AgentExited{Step: "a", Try: 1, Exit: Exit{Code: 1, Stderr: "boom"}, Session: tc.session})
			s, _ := started(r.take())
			if s.Try != 2 || s.Resume != tc.want || !strings.HasPrefix(s.Prompt, "Step a failed (tries: 1)") {
				t.Fatalf("retry %+v, want resume %+v", s, tc.want)
			}
			if got := r.run("a").Agent.Session; got != tc.want {
				t.Errorf("run record's session %+v, want %+v", got, tc.want)
			}
		})
	}
}

// failedWith is the error try n of run ended with.
func failedWith(run *planspec.StepRun, n int) string {
	if e := previousError(run, n); e != nil {
		return *e
	}
	return ""
}

func TestLimitBackoff(t *testing.T) {
	var got []time.Duration
	for n := 1; n <= 8; n++ {
		got = append(got, limitBackoff(n))
	}
	want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 30 * time.Minute, 30 * time.Minute, 30 * time.Minute}
	if !slices.Equal(got, want) {
		t.Errorf("backoff %v, want %v", got, want)
	}
}
