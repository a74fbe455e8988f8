package engine

import (
	"context"
	"errors"
	"fmt"
	"os/user"
	"strings"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// A person's answer to a gate: Approve and Reject are the one way every face
// (the command line, MCP, the page) gives one. Each makes every check once:
// who asks, the note a reject needs, the gate against the state, and then
// queues the answer for whichever stepseq holds the workspace, or applies it
// at once when none does.

// ErrNotWaiting is matched by an answer to a gate that does not wait for
// one; the error says what the run waits for instead.
var ErrNotWaiting = core.ErrNotWaiting

// ErrLaunchedAgent is matched by an answer given from the environment of an
// agent stepseq launched: an agent's own gate is not its to open.
var ErrLaunchedAgent = errors.New("an agent stepseq launched may not answer a gate")

// ErrNoNote is matched by a reject without a note: the note is the blocker.
var ErrNoNote = errors.New("a reject needs a note")

// GateAnswer is a person's answer as a face hands it over.
type GateAnswer struct {
	// Step names the step whose gate it answers; "": the gate that waits,
	// the plan's or the step's at the cursor.
	Step string
	Note string
	// By is who answers; "": the user this process runs as.
	By string
	// Face is how the answer came: cli, mcp or web.
	Face string
	// Env is the answering process's environment, whose marks of a launched
	// agent refuse the answer; nil when the answer comes from elsewhere (the
	// page, an MCP client over HTTP), whose caller's environment is not this
	// process's.
	Env func(string) string
}

// Answered is what became of an answer.
type Answered struct {
	Step string `json:"step"`
	// Plan: the answer went to the plan's gate, held at Step.
	Plan   bool   `json:"plan,omitempty"`
	Answer string `json:"answer"` // approved or rejected
	// Again: the gate had that answer already; this one is journaled too.
	Again bool `json:"again,omitempty"`
	// Message says it in words: whose gate, and who acts on it next.
	Message string `json:"message"`
}

// Approve answers yes to a gate of the run: the step's or plan's gate that
// waits, or a.Step's. A gate that does not wait, an unknown step or run, and an
// answer from a launched agent's environment are refused.
func (c Commands) Approve(_ context.Context, a GateAnswer) (Answered, error) {
	return c.answer(a, true)
}

// Reject answers no to a gate of the run; the note, required, is the step's
// blocker until someone retries it.
func (c Commands) Reject(_ context.Context, a GateAnswer) (Answered, error) {
	return c.answer(a, false)
}

// answer gives a through c's runtime, or, without one, a runtime of the
// call's own for c's workspace; either way through the workspace's files, so
// that whichever stepseq holds it takes the answer.
func (c Commands) answer(a GateAnswer, approve bool) (Answered, error) {
	rt := c.RT
	if rt == nil {
		var err error
		if rt, err = NewRuntime(c.WS.State, nil); err != nil {
			return Answered{}, refusal(err)
		}
		defer rt.Close()
	}
	out, err := rt.answerGate(a, approve, c.ID)
	return out, refusal(err)
}

func (rt *Runtime) answerGate(a GateAnswer, approve bool, id string) (Answered, error) {
	if err := LaunchedAgent(a.Env); err != nil {
		return Answered{}, err
	}
	if !approve && strings.TrimSpace(a.Note) == "" {
		return Answered{}, fmt.Errorf("%w: it is the step's blocker, what whoever retries it reads (--note TEXT)", ErrNoNote)
	}
	st, err := readCommanded(rt.WS, "nothing to answer")
	if err != nil {
		return Answered{}, err
	}
	g, err := core.ResolveGate(st, a.Step)
	if err != nil {
		return Answered{}, fmt.Errorf("run %s: %w", rt.WS.RunName(), err)
	}
	ans := core.Answer{Approve: approve, Plan: g.Plan, By: a.By, Face: a.Face, Note: strings.TrimSpace(a.Note)}
	if ans.By == "" {
		ans.By = userName(rt.Getenv)
	}
	again, err := core.CheckAnswer(st, g, ans)
	if err != nil {
		return Answered{}, fmt.Errorf("run %s: %w", rt.WS.RunName(), err)
	}
	out := Answered{Step: g.Step, Plan: g.Plan, Answer: planspec.AnswerRejected, Again: again}
	if approve {
		out.Answer = planspec.AnswerApproved
	}
	t := core.Trigger{Step: g.Step, From: a.Face, At: planspec.FormatISO(rt.now()), Answer: &ans, ID: id}
	next, err := rt.deliver(t)
	if err != nil {
		return Answered{}, err
	}
	what := g.String()
	if again {
		what += " (answered so already: this answer is journaled too)"
	}
	out.Message = fmt.Sprintf("%s %s of run %s: %s", out.Answer, what, rt.WS.RunName(), next)
	return out, nil
}

// deliver queues t for the stepseq that holds the workspace, or, when none
// does, applies it now for the next check; it says which.
func (rt *Runtime) deliver(t core.Trigger) (string, error) {
	maxRetries, err := proc.MaxRetriesFromEnv(rt.Getenv)
	if err != nil {
		return "", err
	}
	holder, err := triggerNow(rt, &store.StateFile{Path: rt.WS.State}, t, maxRetries)
	if err != nil {
		return "", err
	}
	if holder != nil {
		return fmt.Sprintf("queued for the %s that holds the workspace (pid %d)", holder.Kind, holder.PID), nil
	}
	return "recorded; no sidecar is running, so the next `stepseq check` acts on it", nil
}

// gateReason says what a run awaiting approval (decision d) waits for, with
// the commands that answer it and, when the wait is bounded, until when.
func gateReason(run string, d core.Decision, now time.Time) (reason, at string) {
	g := core.GateRef{Step: d.Step, Plan: d.PlanGate}
	reason = d.Reason + "; answer: " + core.AnswerCommand(run, g, true) + " (or " + core.AnswerCommand(run, g, false) + ")"
	if !d.At.IsZero() {
		reason += "; unanswered until " + ClockTime(d.At, now) + ", its timeout answers it"
		at = planspec.FormatISO(d.At)
	}
	return reason, at
}

// LaunchedAgent refuses env (nil: none to judge) when it is the environment
// of an agent stepseq launched: it holds the marks stepseq sets for each try
// (STEPSEQ_STEP and STEPSEQ_TRY). It guards against an agent answering its
// own gate by running stepseq; an agent running as the same user can still
// edit the files, which only a sandbox stops.
func LaunchedAgent(env func(string) string) error {
	return refuseAgent(env, ErrLaunchedAgent, "a person answers from their own shell, the live page or an operator's MCP session")
}

// refuseAgent refuses env (nil: none to judge) with sentinel when it holds
// the marks stepseq sets for each try it launches (STEPSEQ_STEP and
// STEPSEQ_TRY); who says who may give the command instead.
func refuseAgent(env func(string) string, sentinel error, who string) error {
	if env == nil {
		return nil
	}
	step, try := env("STEPSEQ_STEP"), env("STEPSEQ_TRY")
	if step == "" || try == "" {
		return nil
	}
	return fmt.Errorf("%w: this process runs in the environment of the agent of step %s, try %s (STEPSEQ_STEP and STEPSEQ_TRY are set): %s",
		sentinel, step, try, who)
}

// userName is who this process runs as: $USER, else $LOGNAME, else the
// account's name, else its uid.
func userName(getenv func(string) string) string {
	for _, k := range []string{"USER", "LOGNAME"} {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			return v
		}
	}
	if u, err := user.Current(); err == nil {
		if u.Username != "" {
			return u.Username
		}
		return "uid " + u.Uid
	}
	return "unknown"
}
