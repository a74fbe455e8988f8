package core

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/stepseq/stepseq/planspec"
)

// The pulled-step offer: a step whose agent is mcp starts no
// process; its try is offered to the worker that asks for work, and its done
// report ends it. The sidecar offers the try it launched; a face beside another
// stepseq's sidecar reads the offer from the state. Both ask here.

// PulledTry is what a pulled try offers the worker that takes it.
type PulledTry struct {
	Step            string          `json:"id"`
	Try             int             `json:"try"`
	Prompt          string          `json:"prompt"`
	RequiredOutputs []string        `json:"requiredOutputs,omitempty"`
	Result          json.RawMessage `json:"result,omitempty"` // the result schema
}

// offeredPhases are the phases of a dispatched pulled try that a worker may
// still report in; once its done report is in (reviewing), nothing is offered.
var offeredPhases = []string{planspec.PhaseDispatching, planspec.PhaseInProgress, planspec.PhaseBlocked}

// OfferedTry is the pulled try st has on offer: the step at the cursor, when its
// agent is mcp and its try was dispatched and is not yet reported done. Its
// prompt is the one the try was launched with: the troubleshoot prompt after a
// failed try. ok is false when nothing is offered, with why in words.
func OfferedTry(st *planspec.State) (t PulledTry, ok bool, why string) {
	if why, none := NoOffer(st); none {
		return PulledTry{}, false, why
	}
	id := st.StepQueue[st.CurrentStep]
	run := st.StepRuns[id]
	if run == nil || run.Status != planspec.StatusInProgress || !slices.Contains(offeredPhases, run.Phase) {
		status := "not started"
		if run != nil {
			status = strings.TrimSpace(run.Status + " " + run.Phase)
		}
		return PulledTry{}, false, fmt.Sprintf("step %s is %s: nothing is offered now", id, status)
	}
	spec := st.Steps[id]
	t = PulledTry{Step: id, Try: run.Tries, Prompt: reofferPrompt(id, spec, run)}
	if spec != nil {
		t.RequiredOutputs, t.Result = slices.Clone(spec.RequiredOutputs), slices.Clone(spec.Result)
	}
	return t, true, ""
}

// NoOffer says why st, whatever runs, can offer no pulled try: no plan, a plan
// that is DONE or has no step left, or a step at the cursor that runs a local
// agent. none is false when the step at the cursor is a pulled one.
func NoOffer(st *planspec.State) (why string, none bool) {
	switch {
	case st == nil:
		return "no plan: submit one with plan_submit", true
	case st.Status == planspec.StatusDone:
		return "the plan " + st.Settings.Name + " is DONE: nothing to do", true
	case st.CurrentStep >= len(st.StepQueue):
		return "nothing is due now", true
	}
	if id := st.StepQueue[st.CurrentStep]; !st.IsPull(id) {
		return fmt.Sprintf("step %s runs a local agent (its agent is not mcp)", id), true
	}
	return "", false
}

// Claims are the workers that took pulled tries. A try one worker took is not
// offered to another while the first one's session lives; the same worker gets
// it again (one that lost its answer), and so does any worker once the claim's
// session is gone.
type Claims map[string]string // "step/try" → client

// Take claims step's try for client; ok is false, with why, while another
// client whose session lives (live; nil: every claim lives) holds it.
func (c Claims) Take(step string, try int, client string, live func(client string) bool) (ok bool, why string) {
	key := step + "/" + strconv.Itoa(try)
	if holder, taken := c[key]; taken && holder != client && (live == nil || live(holder)) {
		return false, fmt.Sprintf("step %s try %d is taken by another worker (%s)", step, try, holder)
	}
	c[key] = client
	return true, ""
}
