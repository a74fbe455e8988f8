package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/planspec"
	planpkg "github.com/stepseq/stepseq/planspec/plan"
)

const pullPlan = `agent: mcp
steps:
  - id: fetch
    title: Fetch
    instruction: Find the page and report its url
    result:
      type: object
      required: [url]
      properties:
        url: {type: string, pattern: "^https://"}
  - id: use
    title: Use
    instruction: Use the page
    when: steps.fetch.result.url != ""
`

// pullWS is a workspace whose state runs plan, and a sidecar on it.
func pullWS(t *testing.T, plan string) (*testWS, *sidecarRun) {
	t.Helper()
	p, err := planpkg.ParsePlan(strings.NewReader(plan), "pull.yaml")
	if err != nil {
		t.Fatal(err)
	}
	w := newTestWS(t, string(p.State("plans/pull.yaml", "h").Marshal()))
	return w, w.startSidecar(SidecarOptions{})
}

// take waits for an offer to the client.
func take(t *testing.T, sc *sidecarRun, client string) Offer {
	t.Helper()
	var o Offer
	waitFor(t, func() bool {
		got, ok, _, err := sc.Current(context.Background(), client, nil)
		if err != nil {
			t.Fatal(err)
		}
		o = got
		return ok
	})
	return o
}

func report(status, result string) planspec.WorkerReport {
	r := planspec.WorkerReport{Status: status, Summary: status + " it", Evidence: "did the thing", Risk: "none", Next: "none"}
	if result != "" {
		r.Result = json.RawMessage(result)
	}
	return r
}

func TestSidecar_PullResult(t *testing.T) {
	w, sc := pullWS(t, pullPlan)
	ctx := context.Background()
	o := take(t, sc, "worker-a")
	if o.Step != "fetch" || o.Try != 1 || !strings.Contains(o.Prompt, "Find the page") || len(o.Result) == 0 || o.Token == "" {
		t.Fatalf("offer = %+v", o)
	}
	if _, ok, why, _ := sc.Current(ctx, "worker-b", nil); ok || !strings.Contains(why, "taken by another worker") {
		t.Errorf("second client: ok=%v why=%q", ok, why)
	}
	id, try, err := sc.VerifyToken(o.Token)
	if err != nil || id != "fetch" || try != 1 {
		t.Fatalf("token: %s %d %v", id, try, err)
	}
	if _, _, err := sc.VerifyToken(o.Token + "x"); err == nil {
		t.Error("altered token accepted")
	}
	if ok, reasons, err := verdictOf(sc.Sidecar, ctx, "fetch", 1, report("milestone", ""), "mcp"); err != nil || ok || !strings.Contains(strings.Join(reasons, " "), "before accepted") {
		t.Fatalf("milestone before accepted: %v %q %v", ok, reasons, err)
	}
	if ok, reasons, err := verdictOf(sc.Sidecar, ctx, "fetch", 1, report("accepted", ""), "mcp"); err != nil || !ok {
		t.Fatalf("accepted refused: %q %v", reasons, err)
	}
	ok, reasons, _ := verdictOf(sc.Sidecar, ctx, "fetch", 1, report("done", `{"url":"ftp://x"}`), "mcp")
	if ok || len(reasons) != 2 || !strings.HasPrefix(reasons[1], "/url: ") || !strings.Contains(reasons[0], "2 more allowed") {
		t.Fatalf("invalid result: ok=%v reasons=%q", ok, reasons)
	}
	if ok, reasons, _ := verdictOf(sc.Sidecar, ctx, "fetch", 2, report("milestone", ""), "mcp"); ok || !strings.Contains(reasons[0], "stale") {
		t.Errorf("stale try: %v %q", ok, reasons)
	}
	if ok, reasons, _ := verdictOf(sc.Sidecar, ctx, "fetch", 1, report("done", `{"url":"https://example.org"}`), "mcp"); !ok {
		t.Fatalf("corrected result refused: %q", reasons)
	}
	st := w.waitState("fetch DONE with its result", func(st *planspec.State) bool {
		r := st.StepRuns["fetch"]
		return r != nil && r.Status == planspec.StatusDone && string(r.Result) == `{"url":"https://example.org"}`
	})
	if ph := st.StepRuns["fetch"].Phase; ph != planspec.PhaseDone {
		t.Errorf("phase %s", ph)
	}
	// The gate reads steps.fetch.result: the next step is offered.
	if o := take(t, sc, "worker-a"); o.Step != "use" {
		t.Errorf("next offer %+v", o)
	}
}

func TestSidecar_PullInvalidAbort(t *testing.T) {
	plan := strings.Replace(pullPlan, "    result:\n", "    onInvalid: abort\n    retries: 0\n    result:\n", 1)
	w, sc := pullWS(t, plan)
	ctx := context.Background()
	take(t, sc, "a")
	if ok, _, _ := verdictOf(sc.Sidecar, ctx, "fetch", 0, report("accepted", ""), "mcp"); !ok {
		t.Fatal("accepted refused")
	}
	ok, reasons, _ := verdictOf(sc.Sidecar, ctx, "fetch", 0, report("done", `{"link":1}`), "mcp")
	if ok || !strings.Contains(reasons[0], "onInvalid: abort") {
		t.Fatalf("abort: %v %q", ok, reasons)
	}
	st := w.waitState("fetch FAILED", func(st *planspec.State) bool {
		r := st.StepRuns["fetch"]
		return r != nil && r.Status == planspec.StatusFailed && r.Error != nil
	})
	if e := *st.StepRuns["fetch"].Error; !strings.Contains(e, "invalid result") || !strings.Contains(e, "url") {
		t.Errorf("error %q", e)
	}
	// Out of tries, the step holds the plan until someone retries it.
	snap, err := sc.Snapshot(ctx)
	if err != nil || snap.StepRuns["fetch"].Tries != 1 {
		t.Fatalf("snapshot: %v", err)
	}
	snap.StepRuns["fetch"].Tries = 99 // a copy: the loop's state is not touched
	cmds := Commands{WS: sc.WS, SC: sc.Sidecar}
	if _, err := cmds.Retry(ctx, "nope", "mcp"); RefusalOf(err) == nil || RefusalOf(err).Code != NotFound {
		t.Errorf("retry of an unknown step: %v, want not_found", err)
	}
	if _, err := cmds.Retry(ctx, "fetch", "mcp"); err != nil {
		t.Fatal(err)
	}
	if o := take(t, sc, "a"); o.Step != "fetch" || o.Try != 2 || !strings.Contains(o.Prompt, "invalid result") {
		t.Errorf("retry offer %+v", o)
	}
}

func TestSidecar_PullLaunchTimeout(t *testing.T) {
	plan := strings.Replace(pullPlan, "agent: mcp\n", "agent: mcp\nlaunchTimeout: 50ms\nmaxRetries: 1\n", 1)
	w, sc := pullWS(t, plan)
	// The offer stands 50ms, less than a loaded machine may leave the test
	// between two looks: the try is read from the state its timeout wrote, not
	// from an offer the test would have to catch in time.
	st := w.waitState("launch timeout fails try 1", func(st *planspec.State) bool {
		r := st.StepRuns["fetch"]
		return r != nil && r.Error != nil && strings.Contains(*r.Error, "launch timeout")
	})
	if try := st.StepRuns["fetch"].Tries; try != 1 {
		t.Fatalf("the launch timeout failed try %d, want 1", try)
	}
	if ok, reasons, _ := verdictOf(sc.Sidecar, context.Background(), "fetch", 1, report("accepted", ""), "mcp"); ok {
		t.Errorf("a report for the timed-out try was accepted: %q", reasons)
	}
}

func TestChain_PullStepNeedsASidecar(t *testing.T) {
	p, err := planpkg.ParsePlan(strings.NewReader(pullPlan), "pull.yaml")
	if err != nil {
		t.Fatal(err)
	}
	w := newTestWS(t, string(p.State("plans/pull.yaml", "h").Marshal()))
	if err := w.check(); err == nil || !strings.Contains(err.Error(), "agent: mcp") {
		t.Errorf("check on a pulled step: %v", err)
	}
	if r := w.read().StepRuns["fetch"]; r != nil && r.Tries > 0 {
		t.Errorf("check started a try: %+v", r)
	}
}

func TestRerun_ForgetsTheResult(t *testing.T) {
	p, err := planpkg.ParsePlan(strings.NewReader(pullPlan), "pull.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st := p.State("plans/pull.yaml", "h")
	st.Run("fetch").Status = planspec.StatusDone
	st.Run("fetch").Result = json.RawMessage(`{"url":"https://a"}`)
	if err := core.Rerun(st, "fetch"); err != nil {
		t.Fatal(err)
	}
	if r := st.Run("fetch").Result; r != nil {
		t.Errorf("a re-run step keeps its old result %s: a gate on it would open early", r)
	}
}

// verdictOf is the loop's verdict on a report: accepted, or refused with every
// reason.
func verdictOf(sc *Sidecar, ctx context.Context, step string, try int, rep planspec.WorkerReport, via string) (bool, []string, error) {
	err := sc.report(ctx, step, try, rep, via)
	var refused *RefusedError
	if errors.As(err, &refused) {
		return false, refused.Reasons, nil
	}
	return err == nil, nil, err
}
