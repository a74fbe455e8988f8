package mcp

import (
	"cmp"
	"context"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// Gate is the engine of a server that was merely started: until a client acts
// (plan_submit, run_start, retry, trigger, run_resume, or a worker's
// step_current or step_report) it shows the workspace
// through its files and drives nothing; the first act starts the sidecar
// (Arm) and every call after goes to the engine that start returned. A client
// such as Claude Code starts every MCP server it knows at each session start,
// so a start alone must never launch an agent or write a state file.
type Gate struct {
	mu    sync.Mutex
	cur   Engine
	start func() (Engine, error)
	armed bool
}

// NewGate shows the workspace through idle until Arm starts the sidecar.
func NewGate(idle Engine, start func() (Engine, error)) *Gate {
	return &Gate{cur: idle, start: start}
}

// Arm starts the sidecar once; later calls return the first call's error
// again only while it did not start.
func (g *Gate) Arm() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.armed {
		return nil
	}
	e, err := g.start()
	if err != nil {
		return err
	}
	g.cur, g.armed = e, true
	return nil
}

// Armed says whether a client's act started the sidecar.
func (g *Gate) Armed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.armed
}

func (g *Gate) engine() Engine {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cur
}

// View shows the state through the current engine.
func (g *Gate) View(ctx context.Context, fn func(*planspec.State)) error {
	return g.engine().View(ctx, fn)
}

// Current hands the pulled try on offer, if the sidecar offered one.
func (g *Gate) Current(ctx context.Context, client string, live func(string) bool) (engine.Offer, bool, string, error) {
	return g.engine().Current(ctx, client, live)
}

// Verify returns the step and try a token names.
func (g *Gate) Verify(token string) (string, int, error) { return g.engine().Verify(token) }

// Commands is the current engine's command surface.
func (g *Gate) Commands() engine.Commands { return g.engine().Commands() }

// heldReason is what status says a merely started server waits for.
const heldReason = "shown, not driven: this stepseq mcp drives nothing until a client acts; call run_resume (or plan_submit, run_start, retry, trigger, step_current), or start stepseq mcp with --drive"

// arm starts the sidecar when the server's engine is a gate: a client acted.
func (t *tools) arm() error {
	if g, ok := t.opt.Engine.(*Gate); ok {
		return g.Arm()
	}
	return nil
}

// held says whether nothing is driven yet, waiting for a client's act.
func (t *tools) held() bool {
	g, ok := t.opt.Engine.(*Gate)
	return ok && !g.Armed()
}

// RunResumeInput names the run a client means to drive.
type RunResumeInput struct {
	Run string `json:"run,omitempty" jsonschema:"the run to drive; default the workspace's own, state.json"`
}

// ResumeOutput says the run is driven now.
type ResumeOutput struct {
	Run    string `json:"run"`
	Driven bool   `json:"driven"`
}

// runResume is a client's consent: what is in the folder is driven from now on.
func (t *tools) runResume(_ context.Context, _ *sdk.CallToolRequest, in RunResumeInput) (*sdk.CallToolResult, ResumeOutput, error) {
	v, err := t.runOf(in.Run)
	if err != nil {
		return nil, ResumeOutput{}, err
	}
	v.close()
	if err := t.arm(); err != nil {
		return nil, ResumeOutput{}, err
	}
	return nil, ResumeOutput{Run: cmp.Or(in.Run, store.MainRun), Driven: true}, nil
}

// heldWaiting is what a merely started server's status says: the run waits for a
// client, and what it would do once driven.
func heldWaiting(found bool, would engine.Waiting) engine.Waiting {
	w := engine.Waiting{Action: "held", Step: would.Step, Reason: heldReason}
	switch {
	case !found:
		w.Reason += "; a plan in plans/ would be applied then"
	case would.Reason != "":
		w.Reason += "; then: " + would.Reason
	case would.Action != "":
		w.Reason += "; then: " + would.Action
	}
	return w
}
