package planspec

import (
	"encoding/json"
	"fmt"
	"time"
)

// A person's yes: a step with approve, or a plan with approval, waits for it
// before it starts. The wait is part of the state, so that a restart, a check
// from a heartbeat or another stepseq goes on waiting where the last left off.

// PhaseAwaitingApproval: the step waits for a person's yes before its first
// try. Its status stays PENDING: the original, which knows no approvals, runs
// it as any step.
const PhaseAwaitingApproval = "awaiting_approval"

// The answers a gate takes, and who gives one when nobody does in time.
const (
	AnswerApproved = "approved"
	AnswerRejected = "rejected"
	// OnTimeoutReject and OnTimeoutApprove are what an unanswered gate's
	// timeout does.
	OnTimeoutReject  = "reject"
	OnTimeoutApprove = "approve"
	// FaceTimeout is the face of an answer the gate's timeout gave.
	FaceTimeout = "timeout"
)

// OnTimeoutWords are what an approval's timeout may do.
var OnTimeoutWords = []Word{
	{OnTimeoutReject, "the gate is rejected: the step blocks until someone retries it"},
	{OnTimeoutApprove, "the gate is approved: the step runs"},
}

// ApprovalRequired is a plan's `approval: required`.
const ApprovalRequired = "required"

// Approval is a gate's setting: a step's `approve: true` or a plan's
// `approval: required` (both zero), or with a bound on the wait.
type Approval struct {
	// Timeout bounds the wait; 0: it waits for ever.
	Timeout Duration `json:"timeout,omitempty"`
	// OnTimeout is what an unanswered gate becomes at Timeout: reject (the
	// default) or approve.
	OnTimeout string `json:"onTimeout,omitempty"`
}

// TimeoutApproves reports whether an unanswered gate is approved at its timeout.
func (a *Approval) TimeoutApproves() bool { return a.OnTimeout == OnTimeoutApprove }

// Gate is where a person's yes stands: asked, then answered, and by whom.
type Gate struct {
	AskedIso string `json:"askedIso"`
	// Step is the step a plan's gate held when it was asked.
	Step string `json:"step,omitempty"`
	// Answer is approved or rejected; "" while the gate waits.
	Answer string `json:"answer,omitempty"`
	// By is who answered (a user's name, or stepseq for a timeout), Face
	// through what: cli, mcp, web or timeout.
	By    string `json:"by,omitempty"`
	Face  string `json:"face,omitempty"`
	AtIso string `json:"atIso,omitempty"`
	Note  string `json:"note,omitempty"`
}

// Waiting reports whether the gate was asked and not answered yet.
func (g *Gate) Waiting() bool { return g != nil && g.AskedIso != "" && g.Answer == "" }

// Approved reports whether the gate's answer is yes.
func (g *Gate) Approved() bool { return g != nil && g.Answer == AnswerApproved }

// Rejected reports whether the gate's answer is no.
func (g *Gate) Rejected() bool { return g != nil && g.Answer == AnswerRejected }

// Deadline is when an unanswered gate asked at its AskedIso times out under
// a; zero when it never does.
func (g *Gate) Deadline(a *Approval) time.Time {
	if g == nil || a == nil || a.Timeout <= 0 {
		return time.Time{}
	}
	asked, err := ParseISO(g.AskedIso)
	if err != nil {
		return time.Time{}
	}
	return asked.Add(time.Duration(a.Timeout))
}

// approvalJSON writes a zero Approval as the word the plan wrote (true for a
// step, "required" for a plan) and any other as its object.
func approvalJSON(a *Approval, word any) any {
	if *a == (Approval{}) {
		return word
	}
	return a
}

// approval reads a gate's setting from a state: the word, or the object.
func (d *stateDecoder) approval(o object, prefix, key string, word any) *Approval {
	raw, ok := o.vals[key]
	if !ok || isNull(raw) {
		return nil
	}
	var w any
	if json.Unmarshal(raw, &w) == nil && w == word {
		return &Approval{}
	}
	if b, isBool := w.(bool); isBool && !b {
		return nil
	}
	if _, isObj := w.(map[string]any); !isObj {
		d.fail(prefix+key, "want %v or {timeout, onTimeout}, got %s", wordText(word), describe(raw))
		return nil
	}
	ao, _ := d.object(prefix+key, raw)
	for _, k := range ao.keys {
		if k != "timeout" && k != "onTimeout" {
			d.fail(prefix+key+"."+k, "unknown key: want %v or {timeout, onTimeout}", wordText(word))
		}
	}
	p := prefix + key + "."
	a := Approval{Timeout: d.optDuration(ao, p, "timeout"), OnTimeout: d.oneOf(ao, p, "onTimeout", OnTimeoutWords)}
	return &a
}

// gate reads a gate's record from a state.
func (d *stateDecoder) gate(o object, prefix, key string) *Gate {
	raw, ok := o.vals[key]
	if !ok || isNull(raw) {
		return nil
	}
	var g Gate
	if err := json.Unmarshal(raw, &g); err != nil {
		d.fail(prefix+key, "want stepseq's approval record {askedIso, answer, by, face, atIso, note}, got %s", describe(raw))
		return nil
	}
	if g.Answer != "" && g.Answer != AnswerApproved && g.Answer != AnswerRejected {
		d.fail(prefix+key+".answer", "want %s or %s, got %q", AnswerApproved, AnswerRejected, Clip(g.Answer, 40))
	}
	return &g
}

func wordText(w any) string {
	if s, ok := w.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(w)
}
