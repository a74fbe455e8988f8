package mcp

import (
	"context"
	"fmt"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stepseq/stepseq/executor/engine"
)

// The answers to a gate over MCP: an operator's session may approve or
// reject; a session that pulled a step's try (a worker's) may not, nor one
// over HTTP without the listener's token, nor a stdio server that runs in
// the environment of an agent stepseq launched. A change to a run's budget
// is an operator's act too (budget.go).

// AnswerInput is a person's answer to a gate.
type AnswerInput struct {
	Step string `json:"step,omitempty" jsonschema:"the step whose gate to answer; default the gate that waits (the plan's, or the step's at the cursor)"`
	Run  string `json:"run,omitempty" jsonschema:"the run; default the workspace's own, state.json"`
	Note string `json:"note,omitempty" jsonschema:"why; required to reject: it is the step's blocker"`
	By   string `json:"by,omitempty" jsonschema:"who answers: the person who said yes or no; default the MCP client's name"`
}

// workers are the sessions that asked for a try to pull (step_current): a
// worker's session may not answer a gate, its own or another, nor change a
// run's budget.
type workers struct{ sync.Map }

// mark records client as a worker's session and forgets those that are gone.
func (w *workers) mark(client string, live func(string) bool) {
	w.Range(func(k, _ any) bool {
		if !live(k.(string)) {
			w.Delete(k)
		}
		return true
	})
	w.Store(client, true)
}

func (w *workers) has(client string) bool {
	_, ok := w.Load(client)
	return ok
}

func (t *tools) approve(ctx context.Context, req *sdk.CallToolRequest, in AnswerInput) (*sdk.CallToolResult, engine.Answered, error) {
	return t.answer(ctx, req, in, true)
}

func (t *tools) reject(ctx context.Context, req *sdk.CallToolRequest, in AnswerInput) (*sdk.CallToolResult, engine.Answered, error) {
	return t.answer(ctx, req, in, false)
}

// answer hands the answer to the engine's one method for it, as the
// operator whose session this is.
func (t *tools) answer(ctx context.Context, req *sdk.CallToolRequest, in AnswerInput, approve bool) (*sdk.CallToolResult, engine.Answered, error) {
	if r := t.operator(req, gateAct); r != nil {
		return nil, engine.Answered{}, r
	}
	v, err := t.runOf(in.Run)
	if err != nil {
		return nil, engine.Answered{}, err
	}
	defer v.close()
	// A runtime of the call's own: the workspace's is the loop's.
	rt, err := engine.NewRuntime(v.rt.WS.State, t.opt.Logger)
	if err != nil {
		return nil, engine.Answered{}, err
	}
	defer rt.Close()
	rt.Getenv = t.opt.Runtime.Getenv
	a := engine.GateAnswer{Step: in.Step, Note: in.Note, By: in.By, Face: "mcp", Env: t.clientEnv()}
	if a.By == "" {
		a.By = "mcp client " + clientName(req)
	}
	cmds := engine.Commands{WS: rt.WS, RT: rt}
	answer := cmds.Approve
	if !approve {
		answer = cmds.Reject
	}
	got, err := answer(ctx, a)
	return nil, got, err
}

// clientEnv is the environment of the client that gives a command, whose
// marks of a launched agent refuse it: this server's own over stdio, where
// it runs in its client's environment; nil over HTTP, where it does not.
func (t *tools) clientEnv() func(string) string {
	if t.opt.Remote {
		return nil
	}
	return t.opt.Runtime.Getenv
}

// operatorAct is an act only an operator's session may do, in the words of
// its refusals.
type operatorAct struct {
	doing    string // "answering a gate"
	may      string // "answer a gate"
	why      string // why a worker's session may not, when it needs saying
	instead  string // who does it, and how
	insteadH string // what to do instead of it over an HTTP face with no token
}

var (
	gateAct = operatorAct{doing: "answering a gate", may: "answer a gate",
		instead:  "a person answers from an operator's session, the live page or stepseq approve",
		insteadH: "answer with stepseq approve or reject instead"}
	budgetAct = operatorAct{doing: "changing a run's budget", may: "change a run's budget",
		why:      ": an agent may not raise what it may spend",
		instead:  "a person changes it, from an operator's session (one that pulled no try) or with stepseq budget",
		insteadH: "change it with stepseq budget instead"}
)

// operator refuses a session that may not do act: over HTTP without the
// listener's token, or one that pulled a try.
func (t *tools) operator(req *sdk.CallToolRequest, act operatorAct) *Refusal {
	if t.opt.Remote && !t.opt.TokenGuarded {
		return refuse(NotAllowed, act.doing+" over HTTP needs the listener's token (watch --listen with --token-file or STEPSEQ_TOKEN): "+
			"without it, any program that reaches the port could "+act.may+", an agent included; "+act.insteadH)
	}
	if client := clientID(req); client != "" && t.pulled.has(client) {
		return refuse(NotAllowed, fmt.Sprintf("this session (%s) called step_current, as a worker pulling steps does: a worker's session may not %s%s; %s",
			client, act.may, act.why, act.instead))
	}
	return nil
}

// clientName is the name the client gave at initialize, or its session.
func clientName(req *sdk.CallToolRequest) string {
	if req != nil && req.Session != nil {
		if p := req.Session.InitializeParams(); p != nil && p.ClientInfo != nil && p.ClientInfo.Name != "" {
			return p.ClientInfo.Name
		}
	}
	if c := clientID(req); c != "" {
		return c
	}
	return "(stdio)"
}
