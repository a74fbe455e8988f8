package engine

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/planspec"
)

// heard collects the notifications the sidecar sends.
type heard struct {
	mu    sync.Mutex
	notes []core.Notification
}

func (h *heard) Notify(n core.Notification) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.notes = append(h.notes, n)
}

func (h *heard) events(event string) []core.Notification {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []core.Notification
	for _, n := range h.notes {
		if n.Event == event {
			out = append(out, n)
		}
	}
	return out
}

// A claude that answers its first run with the 1.x usage-limit result, a reset a
// few seconds ahead, and then works: the sidecar runs the same try again after
// the reset and not before, spends no try, and the user hears of the wait at both
// ends. status shows the step waiting until then. The delay from the stated reset
// to the agent's start is logged; it must be within 1 s.
func TestSidecar_LimitWaitsForTheReset(t *testing.T) {
	bin := fakeBin(t, "claude")
	reset := time.Now().Truncate(time.Second).Add(3 * time.Second)
	fakeScripts(t, bin, "claude",
		fakeAnswer{Stdout: claudeJSON(true, fmt.Sprintf("Claude AI usage limit reached|%d", reset.Unix())), Exit: 1},
		fakeAnswer{Stdout: claudeJSON(false, "done")})
	w := newTestWS(t, plan(`"stepseq":{"agent":"claude"}`, `"instruction":"do s1"`))
	h := &heard{}
	w.startSidecar(SidecarOptions{Notifier: h})
	st := w.waitState("waiting for the limit", func(st *planspec.State) bool { return st.Run("s1").Phase == planspec.PhaseWaiting })
	run := st.Run("s1")
	if run.Status != planspec.StatusPending || run.Tries != 0 || run.Agent.Limit.UntilIso != planspec.FormatISO(reset) || !run.Agent.Limit.Stated {
		t.Fatalf("held run: %s tries %d limit %+v", run.Status, run.Tries, run.Agent.Limit)
	}
	rt := w.chain().Runtime
	rep, err := Describe(rt, st, time.Now(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Steps[0].Phase != planspec.PhaseWaiting || rep.WaitingFor.Action != "waiting" || rep.WaitingFor.At != planspec.FormatISO(reset) {
		t.Errorf("status: phase %s, waiting for %+v", rep.Steps[0].Phase, rep.WaitingFor)
	}
	st = w.waitState("done after the reset", done)
	runs := fakeRuns(t, bin, "claude")
	if len(runs) != 2 || runs[1].Env["STEPSEQ_TRY"] != "1" || st.Run("s1").Tries != 1 {
		t.Fatalf("claude ran %d times, tries %d", len(runs), st.Run("s1").Tries)
	}
	late := runs[1].Start.Sub(reset)
	if late < 0 {
		t.Fatalf("the try ran again %v before the reset", -late)
	}
	t.Logf("re-run started %v after the stated reset", late)
	waitFor(t, func() bool { return len(h.events(core.EventWaitingLimit)) == 2 })
	n := h.events(core.EventWaitingLimit)
	if !strings.Contains(n[0].Output, "waiting until") || !strings.Contains(n[1].Output, "usage limit over") || n[0].Status != planspec.ReportMilestone {
		t.Errorf("the user heard %+v", n)
	}
	if run := st.Run("s1"); run.Agent.Limit != (planspec.LimitHold{}) || run.Phase != planspec.PhaseDone {
		t.Errorf("done run: phase %s limit %+v", run.Phase, run.Agent.Limit)
	}
}

// resume: true: a claude retry continues the session its first try named, with
// the troubleshoot prompt; a codex that named no thread retries afresh, and so
// does a plain argv agent.
func TestSidecar_ResumedRetry(t *testing.T) {
	for _, tc := range []struct {
		name, agent string
		first       string
		want        []string // the retry's argv after the program
	}{
		{"claude resumes its session", "claude", claudeJSON(true, "Error: the tool failed"),
			[]string{"-p", "--resume", "s1", "--output-format", "json", "--permission-mode", "acceptEdits"}},
		{"codex resumes its thread", "codex", `{"type":"thread.started","thread_id":"019a8f3e-7c1d"}` + "\n" + `{"type":"turn.failed","error":{"message":"stream disconnected"}}` + "\n",
			[]string{"exec", "--json", "--skip-git-repo-check", "-s", "workspace-write", "resume", "019a8f3e-7c1d"}},
		{"codex without a thread id retries afresh", "codex", `{"type":"turn.failed","error":{"message":"stream disconnected"}}` + "\n",
			[]string{"exec", "--json", "--skip-git-repo-check", "-s", "workspace-write"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := fakeBin(t, tc.agent)
			fakeScripts(t, bin, tc.agent, fakeAnswer{Stdout: tc.first, Exit: 1}, fakeAnswer{Stdout: claudeJSON(false, "done")})
			w := newTestWS(t, plan(fmt.Sprintf(`"stepseq":{"agent":%q,"resume":true}`, tc.agent), `"instruction":"do s1"`))
			w.startSidecar(SidecarOptions{})
			w.waitState("done", done)
			runs := fakeRuns(t, bin, tc.agent)
			if len(runs) != 2 {
				t.Fatalf("%s ran %d times", tc.agent, len(runs))
			}
			argv := runs[1].Argv
			prompt := argv[len(argv)-1]
			if got := argv[1 : len(argv)-1]; !slices.Equal(got, tc.want) || !strings.HasPrefix(prompt, "Step s1 failed (tries: 1)") {
				t.Errorf("retry argv %q", argv)
			}
		})
	}
}

// A plain argv agent never resumes, resume: true or not.
func TestSidecar_PlainAgentRetriesAfresh(t *testing.T) {
	bin := fakeBin(t, "myagent")
	fakeScripts(t, bin, "myagent", fakeAnswer{Stdout: claudeJSON(true, "x"), Exit: 1}, fakeAnswer{})
	w := newTestWS(t, plan(`"stepseq":{"agent":["myagent","--go"],"resume":true}`, `"instruction":"do s1"`))
	w.startSidecar(SidecarOptions{})
	w.waitState("done", done)
	runs := fakeRuns(t, bin, "myagent")
	if len(runs) != 2 || !slices.Equal(runs[1].Argv[1:2], []string{"--go"}) || len(runs[1].Argv) != 3 {
		t.Fatalf("runs %+v", runs)
	}
}

// stepseq check under a heartbeat, on a step waiting out a usage limit: it runs
// nothing, keeps the wait, and exits at once; once the reset has passed, the
// next check runs the same try.
func TestCheck_LeavesALimitWaitAlone(t *testing.T) {
	bin := fakeBin(t, "claude")
	fakeScripts(t, bin, "claude", fakeAnswer{Stdout: claudeJSON(false, "done")})
	held := func(until time.Time) string {
		since := planspec.FormatISO(time.Now().Add(-time.Minute))
		return strings.Replace(plan(`"stepseq":{"agent":"claude"}`, `"instruction":"do s1"`), `"stepRuns":{}`,
			`"stepRuns":{"s1":{"status":"PENDING","tries":0,"lastRunIso":"`+since+`","phase":"waiting","stepseq":{"startedIso":"`+since+`",`+
				`"limit":{"sinceIso":"`+since+`","untilIso":"`+planspec.FormatISO(until)+`","stated":true,"waits":1,"agent":"claude","error":"claude: You've hit your 5-hour limit"}}}}`, 1)
	}
	w := newTestWS(t, held(time.Now().Add(time.Hour)))
	if err := w.check(); err != nil { // a check that waited for the reset would hang here
		t.Fatal(err)
	}
	if runs := fakeRuns(t, bin, "claude"); len(runs) != 0 {
		t.Fatalf("check ran the agent during the wait: %d runs", len(runs))
	}
	if run := w.read().Run("s1"); run.Phase != planspec.PhaseWaiting || run.Tries != 0 || run.Agent.Limit.UntilIso == "" {
		t.Fatalf("after check: phase %s tries %d limit %+v", run.Phase, run.Tries, run.Agent.Limit)
	}
	w.write(held(time.Now().Add(-time.Second)))
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	if st := w.read(); st.Status != planspec.StatusDone || st.Run("s1").Tries != 1 || len(fakeRuns(t, bin, "claude")) != 1 {
		t.Fatalf("check after the reset: %s, tries %d", st.Status, st.Run("s1").Tries)
	}
}

// The fallbacks run first; when every agent of the try is limited, the wait ends
// at the earliest reset any of them named (codex's "try again in 2s", before
// claude's hour), and the same try starts again with the first agent.
func TestSidecar_LimitWaitsForTheEarliestAgent(t *testing.T) {
	bin := fakeBin(t, "claude", "codex")
	later := time.Now().Add(time.Hour).Unix()
	fakeScripts(t, bin, "claude", fakeAnswer{Stdout: claudeJSON(true, fmt.Sprintf("Claude AI usage limit reached|%d", later)), Exit: 1})
	fakeScripts(t, bin, "codex",
		fakeAnswer{Stdout: `{"type":"turn.failed","error":{"message":"Rate limit reached for gpt-5. Please try again in 2s."}}` + "\n", Exit: 1},
		fakeAnswer{Stdout: `{"type":"turn.completed","usage":{}}` + "\n"})
	w := newTestWS(t, plan(`"stepseq":{"agent":"claude","fallback":["codex"]}`, `"instruction":"do s1"`))
	w.startSidecar(SidecarOptions{})
	st := w.waitState("waiting", func(st *planspec.State) bool { return st.Run("s1").Phase == planspec.PhaseWaiting })
	until, err := planspec.ParseISO(st.Run("s1").Agent.Limit.UntilIso)
	if err != nil {
		t.Fatal(err)
	}
	first := fakeRuns(t, bin, "codex")[0].Start
	if d := until.Sub(first); d < 2*time.Second || d > time.Minute || !st.Run("s1").Agent.Limit.Stated {
		t.Fatalf("the wait ends %v after codex's answer (stated %v): want codex's 2s, not claude's hour", d, st.Run("s1").Agent.Limit.Stated)
	}
	st = w.waitState("done", done)
	c, x := fakeRuns(t, bin, "claude"), fakeRuns(t, bin, "codex")
	if len(c) != 2 || len(x) != 2 || x[1].Start.Before(until) || st.Run("s1").Tries != 1 || x[1].Env["STEPSEQ_TRY"] != "1" {
		t.Fatalf("claude ran %d, codex %d times; tries %d", len(c), len(x), st.Run("s1").Tries)
	}
	fallbacks := 0
	for _, e := range w.journal() {
		if e.Event == "fallback" {
			fallbacks++
		}
	}
	if fallbacks != 2 {
		t.Errorf("%d fallbacks journaled, want one per round", fallbacks)
	}
}

// A fallback because the first agent's binary is not on PATH is journaled as
// the rate-limited one is (every fallback is): the sidecar skipped
// such an agent without a word.
func TestSidecar_FallbackForAMissingBinaryIsJournaled(t *testing.T) {
	bin := fakeBin(t, "codex")
	fakeScripts(t, bin, "codex", fakeAnswer{Stdout: `{"type":"turn.completed","usage":{}}` + "\n"})
	w := newTestWS(t, plan(`"stepseq":{"agent":"claude","fallback":["gemini","codex"]}`, `"instruction":"do s1"`))
	w.startSidecar(SidecarOptions{})
	st := w.waitState("done", done)
	if n := len(fakeRuns(t, bin, "codex")); n != 1 || st.Run("s1").Tries != 1 {
		t.Fatalf("codex ran %d times, tries %d: want one run of try 1", n, st.Run("s1").Tries)
	}
	var hops []string
	for _, e := range w.journal() {
		if e.Event == "fallback" {
			if e.Try != 1 || !strings.Contains(e.Reason, "not found on PATH") {
				t.Errorf("fallback entry %+v: want try 1, the binary not found on PATH", e)
			}
			hops = append(hops, fmt.Sprintf("%v→%v", e.Detail["from"], e.Detail["to"]))
		}
	}
	if !slices.Equal(hops, []string{"claude→gemini", "gemini→codex"}) {
		t.Errorf("fallbacks journaled %v, want claude→gemini, gemini→codex", hops)
	}
}
