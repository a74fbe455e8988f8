package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// approvalPlan is two steps, the second with approve: true.
func approvalPlan(extraTop string) string {
	return plan(extraTop, `"instruction":"out:one"`, `"instruction":"out:two","approve":true`)
}

// waitHeard waits for a notification with event to be sent.
func (h *heard) wait(t *testing.T, event string) core.Notification {
	t.Helper()
	waitFor(t, func() bool { return len(h.events(event)) > 0 })
	return h.events(event)[0]
}

// TestSidecar_ApprovalGate: a live sidecar runs s1, then holds s2 in phase
// awaiting_approval (its status PENDING) and tells the request at once with
// the command that answers it; status says what it waits for. An approve
// from the command line's engine method starts s2; a second one is an
// answer, journaled with who gave it and the face, not an error.
func TestSidecar_ApprovalGate(t *testing.T) {
	w := newTestWS(t, approvalPlan(""))
	h := &heard{}
	w.startSidecar(SidecarOptions{Notifier: h})
	st := w.waitState("s2 awaiting approval", func(st *planspec.State) bool {
		return st.Run("s2").Phase == planspec.PhaseAwaitingApproval
	})
	if run := st.Run("s2"); run.Status != planspec.StatusPending || run.Tries != 0 || !run.Gate.Waiting() {
		t.Fatalf("s2 waits as %s tries %d gate %+v", run.Status, run.Tries, run.Gate)
	}
	note := h.wait(t, core.EventAwaitingApproval)
	if note.Status != planspec.PhaseBlocked || note.Step != "s2" || note.Next != "stepseq approve s2 (or stepseq reject s2 --note WHY)" ||
		!strings.Contains(note.Output, "approval asked before step s2 runs: T2 — out:two") {
		t.Fatalf("the request: %+v", note)
	}
	rt := w.chain().Runtime
	rep, err := Describe(rt, st, time.Now(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if rep.WaitingFor.Action != "awaiting_approval" || rep.WaitingFor.Step != "s2" || !strings.Contains(rep.WaitingFor.Reason, "stepseq approve s2") {
		t.Errorf("status waits for %+v", rep.WaitingFor)
	}
	if rep.Steps[1].Phase != planspec.PhaseAwaitingApproval {
		t.Errorf("status shows s2 %s", rep.Steps[1].Phase)
	}

	got, err := Commands{WS: rt.WS, RT: rt}.Approve(context.Background(), GateAnswer{Face: "cli", By: "alice", Note: "go ahead", Env: func(string) string { return "" }})
	if err != nil || got.Step != "s2" || got.Answer != planspec.AnswerApproved || got.Again || !strings.Contains(got.Message, "queued for the watch") {
		t.Fatalf("approve: %+v %v", got, err)
	}
	st = w.waitState("DONE", done)
	if g := st.Run("s2").Gate; !g.Approved() || g.By != "alice" || g.Face != "cli" || g.Note != "go ahead" || g.AtIso == "" {
		t.Errorf("s2's gate: %+v", g)
	}
	again, err := Commands{WS: rt.WS, RT: rt}.Approve(context.Background(), GateAnswer{Step: "s2", Face: "web", By: "bob"})
	if err != nil || !again.Again {
		t.Fatalf("a second approve: %+v %v", again, err)
	}
	w.waitJournal(`"again":true`)
	var answers []core.Entry
	for _, e := range w.journal() {
		if e.Event == planspec.AnswerApproved {
			answers = append(answers, e)
		}
	}
	if len(answers) != 2 || answers[0].Detail["by"] != "alice" || answers[0].Detail["face"] != "cli" || answers[0].Time == "" ||
		answers[1].Detail["by"] != "bob" || answers[1].Detail["face"] != "web" {
		t.Errorf("journaled answers: %+v", answers)
	}
}

// TestRuntime_AnswerRefusals: each refusal is typed and says why: an
// agent's environment, a reject without a note, a gate that does not wait
// (saying what the run waits for), an unknown step, a run with no state.
func TestRuntime_AnswerRefusals(t *testing.T) {
	w := newTestWS(t, approvalPlan(""))
	rt := w.chain().Runtime
	agent := func(k string) string { return map[string]string{"STEPSEQ_STEP": "s2", "STEPSEQ_TRY": "1"}[k] }
	for _, c := range []struct {
		name   string
		answer func() error
		want   error
		saying string
	}{
		{"agent", func() error {
			_, err := Commands{WS: rt.WS, RT: rt}.Approve(context.Background(), GateAnswer{Face: "cli", Env: agent})
			return err
		},
			ErrLaunchedAgent, "the environment of the agent of step s2, try 1"},
		{"no note", func() error {
			_, err := Commands{WS: rt.WS, RT: rt}.Reject(context.Background(), GateAnswer{Step: "s2", Face: "cli"})
			return err
		}, ErrNoNote, "--note"},
		{"not waiting", func() error {
			_, err := Commands{WS: rt.WS, RT: rt}.Approve(context.Background(), GateAnswer{Step: "s2", Face: "cli"})
			return err
		},
			ErrNotWaiting, "step s2's gate is not asked yet; the run waits for step s1, planned"},
		{"no gate", func() error {
			_, err := Commands{WS: rt.WS, RT: rt}.Approve(context.Background(), GateAnswer{Step: "s1", Face: "cli"})
			return err
		}, ErrNotWaiting, "step s1 has no gate"},
		{"unknown", func() error {
			_, err := Commands{WS: rt.WS, RT: rt}.Approve(context.Background(), GateAnswer{Step: "nope", Face: "cli"})
			return err
		}, ErrNoStep, `no step "nope"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.answer()
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.saying) {
				t.Fatalf("got %v, want %v saying %q", err, c.want, c.saying)
			}
		})
	}
	other, err := NewRuntime(store.RunStatePath(w.dir, "ghost"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := (Commands{WS: other.WS, RT: other}).Approve(context.Background(), GateAnswer{Face: "cli"}); !errors.Is(err, store.ErrNoRun) {
		t.Errorf("a run with no state: %v", err)
	}
}

// TestRuntime_RejectWithoutSidecar: with no stepseq holding the workspace, an
// answer is applied at once for the next check: a reject blocks the step
// with the note as its blocker; a retry asks again; the next check asks (and
// tells) again rather than running it.
func TestRuntime_RejectWithoutSidecar(t *testing.T) {
	w := newTestWS(t, plan(`"stepseq":{"name":"p","approval":"required"}`, `"instruction":"out:one"`))
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	if st := w.read(); !st.Settings.Gate.Waiting() || st.Run("s1").Tries != 0 {
		t.Fatalf("the check did not ask: gate %+v, s1 %+v", st.Settings.Gate, st.Run("s1"))
	}
	rt := w.chain().Runtime
	got, err := Commands{WS: rt.WS, RT: rt}.Reject(context.Background(), GateAnswer{Face: "cli", By: "carol", Note: "not this week"})
	if err != nil || !got.Plan || !strings.Contains(got.Message, "next `stepseq check`") {
		t.Fatalf("reject: %+v %v", got, err)
	}
	st := w.read()
	if run := st.Run("s1"); run.Status != planspec.StatusFailed || run.Phase != planspec.PhaseBlocked ||
		len(st.Blockers) != 1 || st.Blockers[0] != "s1: plan p rejected by carol (cli): not this week" {
		t.Fatalf("after the reject: s1 %+v, blockers %q", run, st.Blockers)
	}
	if _, err := (Commands{WS: rt.WS, RT: rt}).Approve(context.Background(), GateAnswer{Face: "cli"}); !errors.Is(err, ErrNotWaiting) || !strings.Contains(err.Error(), "stepseq retry s1") {
		t.Fatalf("approve after a reject: %v", err)
	}
	if _, err := (Commands{WS: rt.WS, RT: rt}).Retry(context.Background(), "s1", "retry"); err != nil {
		t.Fatal(err)
	}
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	if st := w.read(); !st.Settings.Gate.Waiting() || st.Run("s1").Tries != 0 || len(st.Blockers) != 0 {
		t.Fatalf("the retry did not ask again: gate %+v, s1 %+v, blockers %q", st.Settings.Gate, st.Run("s1"), st.Blockers)
	}
	if _, err := (Commands{WS: rt.WS, RT: rt}).Approve(context.Background(), GateAnswer{Face: "cli"}); err != nil {
		t.Fatal(err)
	}
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	if st := w.read(); !done(st) {
		t.Fatalf("approved, the check did not run the plan: %s", st.Marshal())
	}
}
