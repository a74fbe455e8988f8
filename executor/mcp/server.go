// Package mcp is stepseq's MCP server: an agent submits plans, pulls
// the steps whose agent is `mcp` and reports through tools. It is one face of the
// engine: it owns no decision, it asks an Engine (the sidecar's loop, or the
// workspace files when another stepseq holds the workspace). It imports executor;
// executor never imports it.
package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/renameio/v2"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/notify"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
	planpkg "github.com/stepseq/stepseq/planspec/plan"
)

// Options configure a server.
type Options struct {
	Runtime  *engine.Runtime
	Engine   Engine
	PlansDir string // where plan_submit writes; default DIR/plans
	Version  string
	Logger   *slog.Logger
	// PlanWait bounds how long plan_submit waits for the sidecar's verdict.
	PlanWait time.Duration
	// Remote says the plans come over HTTP (Handler sets it): they may name
	// only agent: mcp, a preset or what Allow lists.
	Remote bool
	// Allow is --allow-agent; nil: no list.
	Allow *engine.AllowList
	// Bounds of the HTTP sessions; zero takes the defaults (see Handler).
	SessionIdle          time.Duration
	MaxSessions          int
	MaxSessionsPerClient int
	SessionYield         time.Duration
	// TokenGuarded says the HTTP face is behind the listener's token: a
	// session over it holds the token and, unless it pulled a try, may
	// answer a gate or change a run's budget. Without a token no HTTP
	// session may.
	TokenGuarded bool
	// StreamGrace: a session whose event stream ended and that has made no
	// request for this long has left; the tries it claimed are offered again.
	StreamGrace time.Duration
	// gone says whether an HTTP session's client has left (Handler sets it).
	gone func(sessionID string) bool
	// Authenticated says whether a request presented the listener's token
	// (listener.Authenticated); nil: none does. Sessions opened with it are
	// bounded apart from those opened without, so that no client without the
	// token can keep one with it out.
	Authenticated func(*http.Request) bool
}

func (o *Options) plansDir() string {
	if o.PlansDir != "" {
		return o.PlansDir
	}
	return filepath.Join(o.Runtime.WS.Dir, "plans")
}

// NewServer returns an MCP server with stepseq's tools.
func NewServer(opt Options) *sdk.Server {
	if opt.Version == "" {
		opt.Version = "dev"
	}
	if opt.PlanWait <= 0 {
		opt.PlanWait = 10 * time.Second
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	s := sdk.NewServer(&sdk.Implementation{Name: "stepseq", Version: opt.Version}, &sdk.ServerOptions{
		Logger: opt.Logger,
		Instructions: "stepseq runs a plan of steps. Submit a plan with plan_submit; call step_current for the step to do now " +
			"(steps whose agent is mcp), report accepted, then milestones, then done (with the result the step's schema asks for) " +
			"through step_report with the token step_current gave.",
	})
	t := &tools{opt: opt, srv: s}
	addTool(s, &sdk.Tool{Name: "plan_validate", Description: "Check a YAML plan without running it: every error as line:col: message."}, t.planValidate)
	addTool(s, &sdk.Tool{Name: "plan_list", Description: "The plans in plans/ (what an agent may start): each with its verdict, its steps' titles and the JSON Schema of its params; an invalid one with its errors."}, t.planList)
	addTool(s, &sdk.Tool{Name: "plan_submit", Description: "Queue a YAML plan as plans/<name>.yaml and return the sidecar's verdict (active, waiting, finished); an invalid or refused plan is an error with its code."}, t.planSubmit)
	addTool(s, &sdk.Tool{Name: "status", Description: "The plan's state: every step's status, tries, duration and error, the blockers, what the plan waits for, and what its agents spent and may spend (as status --json)."}, t.status)
	addTool(s, &sdk.Tool{Name: "logs", Description: "A try's output: the last lines of .stepseq/logs/<step>/<try>.log."}, t.logs)
	addTool(s, &sdk.Tool{Name: "notifications", Description: "The transitions the user was told of (.stepseq/notifications.jsonl), oldest first; since: an RFC 3339 time to get only later ones."}, t.notifications)
	addTool(s, &sdk.Tool{Name: "step_current", Description: "The step to do now, with its prompt, required outputs, result schema and a token for step_report; or why there is nothing to do."}, t.stepCurrent)
	addTool(s, &sdk.Tool{Name: "step_report", Description: "Report on the step step_current gave: status accepted, milestone, blocked or done, with summary, evidence, risk (none|low|medium|high — reason) and next. Accepted, or refused (an error) with its code and every reason."}, t.stepReport)
	addTool(s, &sdk.Tool{Name: "retry", Description: "A new try of a blocked or failed step."}, t.retry)
	addTool(s, &sdk.Tool{Name: "trigger", Description: "Re-run a finished step and the steps after it."}, t.trigger)
	addTool(s, &sdk.Tool{Name: "approve", Description: "A person's yes to the gate that waits (a plan with approval: required, a step with approve: true): the step starts. Only from an operator's session: never a worker's that pulled a try, and over HTTP only with the listener's token."}, t.approve)
	addTool(s, &sdk.Tool{Name: "reject", Description: "A person's no to the gate that waits: the step is blocked with the note (required) as its blocker; retry asks again. Only from an operator's session, as approve."}, t.reject)
	addTool(s, &sdk.Tool{Name: "budget", Description: "Raise (usd=+2) or set (tries=40) what the run may spend, keys usd, tokens, tries, wall; a run its budget holds goes on. With no step, the bound that holds the run is raised. Only from an operator's session, as approve: never a worker's that pulled a try, and over HTTP only with the listener's token."}, t.budget)
	addTool(s, &sdk.Tool{Name: "run_start", Description: "Start a run: a plan of plans/ (by name) or given as YAML, with its params, beside the workspace's other runs; answers the run (its name, state file, status, params, progress)."}, t.runStart)
	addTool(s, &sdk.Tool{Name: "run_list", Description: "The workspace's runs: active, blocked, done, closed and invalid ones, with their params and progress."}, t.runList)
	addTool(s, &sdk.Tool{Name: "run_resume", Description: "Drive what is already in the workspace: a server merely started shows its plans and runs but drives nothing until a client acts (this, plan_submit, run_start, retry or trigger)."}, t.runResume)
	addTool(s, &sdk.Tool{Name: "run_close", Description: "Close a run: its agent is stopped as SIGTERM stops it, and its state is archived."}, t.runClose)
	return s
}

// Handler serves the tools over streamable HTTP (watch --listen mounts it at /mcp),
// its sessions bounded: closed after SessionIdle without a request, at most
// MaxSessions at once and MaxSessionsPerClient for one client address, those
// opened with the token (Authenticated) and those without each apart. At a
// bound the least recently used session idle for SessionYield gives way
// before a new one is refused. The plans it takes arrive over HTTP: see
// Options.Remote.
func Handler(opt Options) http.Handler {
	opt.Remote = true
	if opt.SessionIdle <= 0 {
		opt.SessionIdle = DefaultSessionIdle
	}
	if opt.MaxSessions <= 0 {
		opt.MaxSessions = DefaultMaxSessions
	}
	if opt.MaxSessionsPerClient <= 0 {
		opt.MaxSessionsPerClient = DefaultMaxSessionsPerClient
	}
	if opt.SessionYield <= 0 {
		opt.SessionYield = DefaultSessionYield
	}
	if opt.StreamGrace <= 0 {
		opt.StreamGrace = DefaultStreamGrace
	}
	var gate *sessionGate
	opt.gone = func(id string) bool { return gate != nil && gate.gone(id) }
	srv := NewServer(opt)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv },
		&sdk.StreamableHTTPOptions{Logger: opt.Logger, SessionTimeout: opt.SessionIdle})
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	gate = &sessionGate{srv: srv, next: h, max: opt.MaxSessions, per: opt.MaxSessionsPerClient, yield: opt.SessionYield,
		grace: opt.StreamGrace, token: opt.Authenticated, now: time.Now, log: log, held: map[string]*heldSession{}}
	return gate
}

// Serve speaks MCP over stdin and stdout until the client leaves or ctx ends.
func Serve(ctx context.Context, opt Options) error {
	return NewServer(opt).Run(ctx, &sdk.StdioTransport{})
}

type tools struct {
	opt Options
	srv *sdk.Server

	runsMu sync.Mutex
	runs   map[string]Engine // run name → its files engine (runOf)

	pulled workers // the sessions that took a try: no answer to a gate nor budget change from them
}

// PlanInput is a plan to check.
type PlanInput struct {
	YAML string `json:"yaml" jsonschema:"the plan, as YAML"`
}

// PlanVerdict is what the checks found.
type PlanVerdict struct {
	Valid  bool     `json:"valid"`
	Name   string   `json:"name,omitempty"`
	Steps  int      `json:"steps,omitempty"`
	Errors []string `json:"errors,omitempty" jsonschema:"every problem as line:col: message"`
	Code   Code     `json:"code,omitempty" jsonschema:"not_allowed when an agent the plan names may not be named from here; plan_submit would refuse it"`
}

func validate(yaml string) (*planpkg.Plan, PlanVerdict) {
	p, err := planpkg.ParsePlan(strings.NewReader(yaml), "plan.yaml")
	if err != nil {
		var out []string
		for _, l := range engine.ErrorLines(err) {
			out = append(out, strings.TrimPrefix(l, "plan.yaml:"))
		}
		return nil, PlanVerdict{Errors: out}
	}
	return p, PlanVerdict{Valid: true, Name: p.Name, Steps: len(p.Steps)}
}

// planValidate answers a question: a plan that is not valid is its answer, not
// a refusal.
func (t *tools) planValidate(_ context.Context, _ *sdk.CallToolRequest, in PlanInput) (*sdk.CallToolResult, PlanVerdict, error) {
	p, v := validate(in.YAML)
	if v.Valid {
		// What plan_submit would refuse is said here too, with the same words.
		if r := t.admit(p, ""); r != nil {
			v = PlanVerdict{Errors: r.Reasons, Code: r.Code}
		}
	}
	return nil, v, nil
}

// SubmitInput is a plan to queue.
type SubmitInput struct {
	Name string `json:"name" jsonschema:"the plan file's name: letters, digits, ., _ and -; written as plans/<name>.yaml"`
	YAML string `json:"yaml" jsonschema:"the plan, as YAML"`
	// Params are the run's params, checked against the plan's params'
	// schemas as stepseq apply --param checks them.
	Params map[string]any `json:"params,omitempty" jsonschema:"the run's params by name, each checked against its schema in the plan's params; a param not given takes its default"`
}

// SubmitVerdict is the sidecar's verdict on a submitted plan. A plan that is
// invalid or refused is an error (invalid_plan, not_allowed) that carries it.
type SubmitVerdict struct {
	File   string   `json:"file"`
	Status string   `json:"status" jsonschema:"active, waiting (another plan runs), finished; on an error: invalid, or refused (see code)"`
	Errors []string `json:"errors,omitempty"`
}

// admit applies the allow rule to a plan handed in through this server, before
// anything is written: over HTTP it may name only agent: mcp, a preset or what
// --allow-agent lists; from any source, a list bounds it, and the shell rule
// holds; its conditions read only the environment --expose-env exposes. It
// returns the refusal (not_allowed or invalid_plan), nil when the plan may
// come in.
func (t *tools) admit(p *planpkg.Plan, rel string) *Refusal {
	from := engine.FromWorkspace
	if t.opt.Remote {
		from = engine.FromHTTP
	}
	rt := t.opt.Runtime
	err := engine.CheckPlanAgents(p, from, t.opt.Allow, rt.Getenv, rt.WS.Dir)
	if err == nil {
		err = p.CheckEnv(rt.ExposeEnv)
	}
	if err == nil {
		return nil
	}
	r := refuse(InvalidPlan, err.Error())
	switch {
	case errors.Is(err, engine.ErrNotAllowed):
		r.Code = NotAllowed
	case errors.Is(err, planpkg.ErrInvalidPlan):
		r.Reasons = nil
		for _, l := range engine.ErrorLines(err) {
			r.Reasons = append(r.Reasons, strings.TrimPrefix(l, "plan.yaml:"))
		}
	}
	if rel != "" {
		t.opt.Logger.Warn("plan refused; nothing written", "file", rel, "code", r.Code, "err", err)
	}
	return r
}

// Face names this face in what a plan it hands in keeps (core.PlanFile.Face,
// the run's state): such a run's env() reads only what --expose-env exposes.
const Face = "mcp"

// maxPlanName bounds a submitted plan's name: plans/<name>.yaml and its record
// .stepseq/plans/<name>.json must fit the 255 bytes of a file name.
const maxPlanName = 200

// submittedName is the plan file's name plan_submit writes, or the refusal
// (invalid_params) of a name the sidecar would never read.
func submittedName(given string) (string, error) {
	name := strings.TrimSuffix(strings.TrimSuffix(given, ".yaml"), ".plan")
	if name == "" || strings.Trim(name, "._-") == "" || strings.ContainsAny(name, "/\\") || strings.ContainsFunc(name, func(r rune) bool {
		return !(r == '.' || r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) {
		return "", refuse(InvalidParams, fmt.Sprintf("name %q: want letters, digits, \".\", \"_\" or \"-\", like \"research\"", given))
	}
	// Refused at once, with the reason: the sidecar reads no hidden plan file, so
	// waiting for its verdict would only time out.
	if strings.HasPrefix(name, ".") {
		return "", refuse(InvalidParams, fmt.Sprintf("name %q: a name that starts with \".\" is a hidden file, which the sidecar does not read; start it with a letter or digit, like %q", given, strings.TrimLeft(name, ".")))
	}
	if len(name) > maxPlanName {
		return "", refuse(InvalidParams, fmt.Sprintf("name %q: longer than %d bytes; a file name must fit the file system", given[:40]+"…", maxPlanName))
	}
	return name, nil
}

func (t *tools) planSubmit(ctx context.Context, req *sdk.CallToolRequest, in SubmitInput) (*sdk.CallToolResult, SubmitVerdict, error) {
	name, err := submittedName(in.Name)
	if err != nil {
		return nil, SubmitVerdict{}, err
	}
	rel := "plans/" + name + ".yaml"
	plan, v := validate(in.YAML)
	if !v.Valid {
		return nil, SubmitVerdict{File: rel, Status: core.PlanInvalid, Errors: v.Errors}, refuse(InvalidPlan, v.Errors...)
	}
	if r := t.admit(plan, rel); r != nil {
		return nil, SubmitVerdict{File: rel, Status: "refused", Errors: r.Reasons}, r
	}
	if _, err := plan.ResolveParams(in.Params); err != nil {
		r := refusalOf(err)
		return nil, SubmitVerdict{File: rel, Status: "refused", Errors: r.Reasons}, r
	}
	replace, r := t.claimName(ctx, name)
	if r != nil {
		t.opt.Logger.Warn("plan refused: its name is in use; nothing written", "file", rel, "err", r)
		return nil, SubmitVerdict{File: rel, Status: "refused", Errors: r.Reasons}, r
	}
	if err := t.arm(); err != nil {
		return nil, SubmitVerdict{}, err
	}
	dir := t.opt.plansDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, SubmitVerdict{}, fmt.Errorf("plans folder: %w", err)
	}
	content := []byte(in.YAML)
	hash := planpkg.Hash(content)
	ws := t.opt.Runtime.WS
	var rec core.PlanRecord
	judged := func() bool {
		r, ok := ws.ReadPlanRecord(name)
		rec = r
		if !ok || r.Hash != hash {
			return false
		}
		if r.Status != core.PlanWaiting {
			return true
		}
		// Waiting is the verdict only while another plan runs; otherwise this
		// one is about to be applied.
		st, err := (&store.StateFile{Path: ws.State}).Read()
		return err == nil && st.Settings.Source != rel && st.Status != planspec.StatusDone
	}
	err = waitDir(ctx, ws.PlansDir(), t.opt.PlanWait, func() error {
		// The record first: the sidecar reads it when it sees the plan, and a
		// plan file without it would be taken for the workspace owner's.
		if err := ws.WriteSubmission(name, store.Submission{Hash: hash, Params: in.Params, Face: Face, Client: clientID(req)}); err != nil {
			return err
		}
		if replace {
			return renameio.WriteFile(filepath.Join(dir, name+".yaml"), content, 0o644, renameio.WithTempDir(dir))
		}
		return createNew(dir, name+".yaml", content)
	}, judged)
	if errors.Is(err, fs.ErrExist) {
		r := refuse(Busy, fmt.Sprintf("name %q is in use: %s appeared while it was being submitted, and a submit never replaces a plan file it did not write; submit under another name", name, rel))
		return nil, SubmitVerdict{File: rel, Status: "refused", Errors: r.Reasons}, r
	}
	if err != nil {
		return nil, SubmitVerdict{}, refuse(Busy, fmt.Sprintf("%s written, but no verdict within %s: is a sidecar running on %s? (%v)", rel, t.opt.PlanWait, ws.Dir, err))
	}
	verdict := SubmitVerdict{File: rel, Status: rec.Status, Errors: rec.Errors}
	if rec.Status == core.PlanInvalid {
		return nil, verdict, refuse(InvalidPlan, rec.Errors...)
	}
	return nil, verdict, nil
}

// claimName says whether plan_submit may write plans/NAME.yaml. A name
// in use is refused with busy, naming its owner: a plan file of that name the
// workspace's owner wrote (under any of the extensions the sidecar reads), one
// a face submitted that is not judged yet, waits or runs, and the plan of
// that name state.json runs, its file gone or not. A face never replaces or edits a plan
// file it did not write, nor rewrites a running run. replace is true when the
// file there is a face's whose plan finished or was refused: a new run of it.
func (t *tools) claimName(ctx context.Context, name string) (replace bool, r *Refusal) {
	ws := t.opt.Runtime.WS
	inUse := func(why string) *Refusal { return refuse(Busy, fmt.Sprintf("name %q is in use: %s", name, why)) }
	dir := t.opt.plansDir()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		n := e.Name()
		if planpkg.PlanName(n) != name || !(strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
			continue
		}
		why := t.heldBy(dir, n, name)
		if why != "" {
			return false, inUse(why)
		}
		replace = true
	}
	var running string
	err := t.opt.Engine.View(ctx, func(st *planspec.State) {
		if st != nil && st.Settings.Source != "" && planpkg.PlanName(st.Settings.Source) == name && st.Status != planspec.StatusDone {
			running = fmt.Sprintf("%s runs in %s (step %d of %d; %s), and a submit never rewrites a running run: submit under another name, or wait until it ends",
				st.Settings.Source, filepath.Base(ws.State), min(st.CurrentStep+1, len(st.StepQueue)), len(st.StepQueue), t.ownerOf(name, st.Settings.Hash, st.Settings.Face))
		}
	})
	switch {
	case err != nil:
		return false, refusalOf(err)
	case running != "":
		return false, inUse(running)
	}
	return replace, nil
}

// heldBy says who holds plans/n, a file of plan name, so that a submit may
// not replace it: the workspace's owner, or a face whose plan is not judged
// yet, waits or runs; "" when it is a face's whose plan finished or was
// refused.
func (t *tools) heldBy(dir, n, name string) string {
	ws := t.opt.Runtime.WS
	hash := ""
	if data, err := store.ReadFile(filepath.Join(dir, n), store.PlanCap); err == nil {
		hash = planpkg.Hash(data)
	}
	sub, ok := ws.Submitted(name, hash)
	if n != name+".yaml" || hash == "" || !ok || sub.Face == "" {
		return fmt.Sprintf("plans/%s is the workspace's own plan (written there, not submitted through MCP), and a submit never replaces it; submit under another name", n)
	}
	rec, ok := ws.ReadPlanRecord(name)
	what := "is not judged yet"
	switch {
	case !ok || rec.Hash != hash:
	case rec.Status == core.PlanFinished, rec.Status == core.PlanInvalid:
		return ""
	case rec.Status == core.PlanWaiting:
		what = "waits its turn"
	case rec.Status == core.PlanActive:
		what = "runs"
	}
	return fmt.Sprintf("plans/%s, %s, %s; submit under another name, or wait until it ends", n, t.ownerOf(name, hash, sub.Face), what)
}

// ownerOf names who handed in the content hash of plan name: the workspace's
// owner, or a face and the client that submitted it.
func (t *tools) ownerOf(name, hash, face string) string {
	if face == "" {
		return "the workspace's own plan"
	}
	who := "submitted through " + strings.ToUpper(face)
	if sub, ok := t.opt.Runtime.WS.Submitted(name, hash); ok && sub.Client != "" {
		who += " by " + sub.Client
	}
	return who
}

// createNew writes content as dir/name only where no file is: linked into
// place once whole, it never replaces a file another writer put there
// meanwhile (fs.ErrExist). A file system without hard links gets it created
// exclusively and written in place, which the sidecar judges once it is still.
func createNew(dir, name string, content []byte) error {
	path := filepath.Join(dir, name)
	tmp, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(content)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	err = os.Link(tmp.Name(), path)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(content); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Empty takes no arguments.
type Empty struct{}

// status answers with the report as structured content, not checked again
// against its own schema, and a few lines of text: on a plan of a
// thousand steps the report is a hundred kilobytes, which a second copy and a
// validation pass would make the slowest part of the call.
func (t *tools) status(ctx context.Context, _ *sdk.CallToolRequest, in RunInput) (*sdk.CallToolResult, engine.StatusReport, error) {
	var none engine.StatusReport
	maxRetries, err := proc.MaxRetriesFromEnv(t.opt.Runtime.Getenv)
	if err != nil {
		return nil, none, err
	}
	v, err := t.runOf(in.Run)
	if err != nil {
		return nil, none, err
	}
	defer v.close()
	var r engine.StatusReport
	found := false
	err = v.eng.View(ctx, func(st *planspec.State) {
		if found = st != nil; found {
			r, _ = engine.Describe(v.rt, st, v.rt.Now(), maxRetries)
			detach(&r)
		}
	})
	if err != nil {
		return nil, none, err
	}
	if !found {
		// No plan yet is an answer: nothing runs, and what to do about it.
		r = engine.StatusReport{State: v.rt.WS.State, Steps: []engine.StepReport{}, Blockers: []string{},
			WaitingFor: engine.Waiting{Action: "idle", Reason: "no plan yet: submit one with plan_submit"}}
	}
	if t.held() {
		r.WaitingFor = heldWaiting(found, r.WaitingFor)
	}
	// The report itself, not its encoding: each json.RawMessage in the answer is
	// compacted again at every level of the response's encoding.
	return &sdk.CallToolResult{StructuredContent: &r, Content: []sdk.Content{&sdk.TextContent{Text: statusText(r)}}}, none, nil
}

// detach copies what a report points to in the state, which the loop goes on
// changing once View returns.
func detach(r *engine.StatusReport) {
	for i := range r.Steps {
		s := &r.Steps[i]
		if s.LastRunIso != nil {
			v := *s.LastRunIso
			s.LastRunIso = &v
		}
		if s.Error != nil {
			v := *s.Error
			s.Error = &v
		}
	}
	r.WaitingFor.MissingOutputs = slices.Clone(r.WaitingFor.MissingOutputs)
}

// statusText is the report in a few lines, for clients that read text only.
func statusText(r engine.StatusReport) string {
	var b strings.Builder
	done := 0
	for _, s := range r.Steps {
		if s.Status == planspec.StatusDone {
			done++
		}
	}
	fmt.Fprintf(&b, "plan %s: %s, %d of %d steps done\n", r.Plan, r.Run, done, len(r.Steps))
	if r.Progress != "" {
		fmt.Fprintf(&b, "%s\n", r.Progress)
	}
	if w := r.WaitingFor; w.Reason != "" {
		fmt.Fprintf(&b, "%s %s: %s\n", w.Action, w.Step, w.Reason)
	}
	for _, bl := range r.Blockers {
		fmt.Fprintf(&b, "blocker: %s\n", bl)
	}
	for _, s := range r.Steps {
		if s.Status == planspec.StatusFailed || s.Running || s.Error != nil && s.Status != planspec.StatusDone {
			line := fmt.Sprintf("step %s: %s, tries %d", s.ID, s.Status, s.Tries)
			if s.Error != nil {
				line += ": " + *s.Error
			}
			b.WriteString(line + "\n")
		}
	}
	b.WriteString("the whole report is the structured content")
	return b.String()
}

// LogsInput names a try's log.
type LogsInput struct {
	Step string `json:"step" jsonschema:"the step id"`
	Try  int    `json:"try,omitempty" jsonschema:"the try; default the latest"`
	Tail int    `json:"tail,omitempty" jsonschema:"how many last lines; default 200"`
	Run  string `json:"run,omitempty" jsonschema:"the run; default the workspace's own, state.json"`
}

// LogsOutput is a log's tail.
type LogsOutput struct {
	Step      string   `json:"step"`
	Try       int      `json:"try"`
	Lines     []string `json:"lines" jsonschema:"the log's last lines, oldest first"`
	Truncated bool     `json:"truncated" jsonschema:"earlier lines were left out"`
}

// maxLogRead caps what logs reads of a log's end.
const maxLogRead = 1 << 20

func (t *tools) logs(ctx context.Context, _ *sdk.CallToolRequest, in LogsInput) (*sdk.CallToolResult, LogsOutput, error) {
	v, err := t.runOf(in.Run)
	if err != nil {
		return nil, LogsOutput{}, err
	}
	defer v.close()
	try, tries, known := in.Try, 0, false
	var ids []string
	err = v.eng.View(ctx, func(st *planspec.State) {
		if st == nil {
			return
		}
		ids = slices.Clone(st.StepQueue)
		if known = st.Steps[in.Step] != nil; known {
			if run := st.StepRuns[in.Step]; run != nil {
				tries = run.Tries
			}
		}
	})
	if err != nil {
		return nil, LogsOutput{}, err
	}
	if !known {
		return nil, LogsOutput{}, core.NoStep(&planspec.State{StepQueue: ids}, in.Step)
	}
	switch {
	case try <= 0 && tries == 0:
		return nil, LogsOutput{Step: in.Step, Lines: []string{}}, nil // not run yet: no line, an answer
	case try <= 0:
		try = tries
	case try > tries:
		return nil, LogsOutput{}, refuse(NotFound, fmt.Sprintf("step %s has had %d tries: no try %d", in.Step, tries, try))
	}
	tail := in.Tail
	if tail <= 0 {
		tail = 200
	}
	p, err := v.rt.WS.ReadLog(nil, in.Step, try, 0, maxLogRead)
	if errors.Is(err, os.ErrNotExist) {
		return nil, LogsOutput{Step: in.Step, Try: try, Lines: []string{}}, nil // a silent agent, or a pulled try: no output
	}
	if err != nil {
		return nil, LogsOutput{}, err
	}
	lines := strings.Split(strings.TrimRight(string(p.Data), "\n"), "\n")
	out := LogsOutput{Step: in.Step, Try: try, Truncated: p.Start > 0}
	if len(lines) > tail {
		lines, out.Truncated = lines[len(lines)-tail:], true
	}
	out.Lines = lines
	return nil, out, nil
}

// NotificationsInput filters notifications.
type NotificationsInput struct {
	Since string `json:"since,omitempty" jsonschema:"an RFC 3339 time: only notifications after it"`
	Run   string `json:"run,omitempty" jsonschema:"only this run's (main: the workspace's own); default every run's, each naming its run"`
}

// NotificationsOutput are notifications, oldest first.
type NotificationsOutput struct {
	Notifications []map[string]any `json:"notifications" jsonschema:"each as .stepseq/notifications.jsonl holds it"`
	Truncated     bool             `json:"truncated" jsonschema:"older ones were left out"`
}

// maxNotifications bounds one answer.
const maxNotifications = 500

func (t *tools) notifications(_ context.Context, _ *sdk.CallToolRequest, in NotificationsInput) (*sdk.CallToolResult, NotificationsOutput, error) {
	var since time.Time
	if in.Since != "" {
		var err error
		if since, err = planspec.ParseISO(in.Since); err != nil {
			return nil, NotificationsOutput{}, refuse(InvalidParams, fmt.Sprintf("arguments.since: %v; want an RFC 3339 time like 2026-02-10T21:30:00Z", err))
		}
	}
	if in.Run != "" && in.Run != store.MainRun {
		if err := store.ValidRunName(in.Run); err != nil {
			return nil, NotificationsOutput{}, err
		}
	}
	out := NotificationsOutput{Notifications: []map[string]any{}}
	data, err := os.ReadFile(filepath.Join(t.opt.Runtime.WS.Dir, store.MetaDir, "notifications.jsonl"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, out, nil
	}
	if err != nil {
		return nil, out, err
	}
	for line := range notify.FeedLines(data) {
		rec, ok := notify.FeedRecord(line)
		var n map[string]any
		if !ok || json.Unmarshal(rec, &n) != nil {
			continue
		}
		if run, _ := n["run"].(string); in.Run != "" && run != in.Run && !(in.Run == store.MainRun && run == "") {
			continue
		}
		if !since.IsZero() {
			ts, _ := n["time"].(string)
			if at, err := planspec.ParseISO(ts); err != nil || !at.After(since) {
				continue
			}
		}
		out.Notifications = append(out.Notifications, n)
	}
	if len(out.Notifications) > maxNotifications {
		out.Notifications = out.Notifications[len(out.Notifications)-maxNotifications:]
		out.Truncated = true
	}
	return nil, out, nil
}

// CurrentOutput is the step to do now, or why there is none.
type CurrentOutput struct {
	Step *Offer `json:"step,omitempty"`
	Why  string `json:"why,omitempty" jsonschema:"why there is nothing to do now"`
}

// Offer is a pulled step as the worker gets it.
type Offer struct {
	ID              string         `json:"id"`
	Try             int            `json:"try"`
	Prompt          string         `json:"prompt"`
	RequiredOutputs []string       `json:"requiredOutputs"`
	Result          map[string]any `json:"result,omitempty" jsonschema:"the JSON Schema the done report's result must satisfy"`
	ResultFile      string         `json:"resultFile,omitempty" jsonschema:"the workspace file the step's result is read from (JSON or YAML) when the done report gives none"`
	Token           string         `json:"token" jsonschema:"pass it to step_report"`
	Progress        string         `json:"progress,omitempty" jsonschema:"where the step stands in its loop: round 2/5, step 1/3"`
}

func clientID(req *sdk.CallToolRequest) string {
	if req == nil || req.Session == nil {
		return ""
	}
	return sessionClient(req.Session)
}

// sessionClient names the client of a session: its name and the session.
func sessionClient(ss *sdk.ServerSession) string {
	id := ss.ID()
	if id == "" {
		id = fmt.Sprintf("%p", ss)
	}
	if p := ss.InitializeParams(); p != nil && p.ClientInfo != nil && p.ClientInfo.Name != "" {
		id = p.ClientInfo.Name + " " + id
	}
	return id
}

// live says whether the session a client name came from is still held: a claim
// on a try lasts while it is (closed, or expired after SessionIdle, it is gone).
func (t *tools) live(client string) bool {
	for ss := range t.srv.Sessions() {
		if sessionClient(ss) == client {
			// Over HTTP, a client whose stream ended and did not come back
			// within the grace has left, its session not yet expired.
			return t.opt.gone == nil || !t.opt.gone(ss.ID())
		}
	}
	return false
}

func (t *tools) stepCurrent(ctx context.Context, req *sdk.CallToolRequest, in RunInput) (*sdk.CallToolResult, CurrentOutput, error) {
	t.pulled.mark(clientID(req), t.live) // a worker's session from now on: it answers no gate, changes no budget
	v, err := t.runOf(in.Run)
	if err != nil {
		return nil, CurrentOutput{}, err
	}
	defer v.close()
	// A worker that asks for its step consents to the run being driven.
	if err := t.arm(); err != nil {
		return nil, CurrentOutput{}, err
	}
	o, ok, why, err := v.eng.Current(ctx, clientID(req), t.live)
	if err != nil || !ok {
		return nil, CurrentOutput{Why: why}, err
	}
	off := &Offer{ID: o.Step, Try: o.Try, Prompt: o.Prompt, RequiredOutputs: o.RequiredOutputs, Token: runToken(v.name, o.Token)}
	if off.RequiredOutputs == nil {
		off.RequiredOutputs = []string{}
	}
	if len(o.Result) > 0 {
		_ = json.Unmarshal(o.Result, &off.Result)
	}
	_ = v.eng.View(ctx, func(st *planspec.State) {
		if st != nil {
			off.Progress = st.Progress(o.Step)
			off.ResultFile = st.ResultFromFile(o.Step)
		}
	})
	return nil, CurrentOutput{Step: off}, nil
}

// ReportInput is a worker's report.
type ReportInput struct {
	Token     string      `json:"token" jsonschema:"the token step_current gave"`
	Status    string      `json:"status" jsonschema:"accepted, milestone, blocked or done"`
	Summary   string      `json:"summary" jsonschema:"one sentence"`
	Evidence  string      `json:"evidence" jsonschema:"first action / artifact / specific error / final artifact"`
	Risk      string      `json:"risk" jsonschema:"none, low, medium or high, then — and the reason"`
	Next      string      `json:"next" jsonschema:"what comes next; none when done"`
	Artifacts []string    `json:"artifacts,omitempty" jsonschema:"workspace paths the report names"`
	Result    any         `json:"result,omitempty" jsonschema:"with done: the value the step's result schema describes (any JSON value)"`
	Run       string      `json:"run,omitempty" jsonschema:"the run; the token names it, so it may be left out"`
	Usage     *UsageInput `json:"usage,omitempty" jsonschema:"what the try spent, as your CLI said it; a budget counts it"`
}

// ReportVerdict is accepted, or refused with every reason.
type ReportVerdict struct {
	Accepted bool     `json:"accepted"`
	Step     string   `json:"step"`
	Try      int      `json:"try"`
	Reasons  []string `json:"reasons,omitempty" jsonschema:"why it was refused: each schema error as instance path: message"`
	Code     Code     `json:"code,omitempty" jsonschema:"why it was refused: stale (the try is over, or the token is none of this workspace's: call step_current), invalid_result (the result fails the step's schema: send done again, corrected), invalid_params (the report lacks a field), not_allowed (the step's phase does not take it now)"`
}

func (t *tools) stepReport(ctx context.Context, _ *sdk.CallToolRequest, in ReportInput) (*sdk.CallToolResult, ReportVerdict, error) {
	run, token := tokenRun(in.Token)
	if in.Run != "" && in.Run != store.MainRun && in.Run != run || in.Run == store.MainRun && run != "" {
		return nil, ReportVerdict{}, refuse(InvalidParams, fmt.Sprintf("arguments.run: %s, but the token is a try of run %s; leave run out, the token names its run",
			in.Run, cmp.Or(run, store.MainRun)))
	}
	v, err := t.runOf(run)
	if err != nil {
		return nil, ReportVerdict{}, err
	}
	defer v.close()
	if err := t.arm(); err != nil {
		return nil, ReportVerdict{}, err
	}
	step, try, err := v.eng.Verify(token)
	if err != nil {
		return nil, ReportVerdict{}, err
	}
	rep := planspec.WorkerReport{Status: strings.ToLower(strings.TrimSpace(in.Status)), Summary: in.Summary, Evidence: in.Evidence,
		Risk: in.Risk, Next: in.Next, Artifacts: in.Artifacts}
	if in.Result != nil {
		if rep.Result, err = json.Marshal(in.Result); err != nil {
			return nil, ReportVerdict{}, refuse(InvalidParams, fmt.Sprintf("arguments.result: %v", err))
		}
	}
	if in.Usage != nil {
		if rep.Usage, err = json.Marshal(in.Usage.usage()); err != nil {
			return nil, ReportVerdict{}, refuse(InvalidParams, fmt.Sprintf("arguments.usage: %v", err))
		}
	}
	verdict := ReportVerdict{Step: step, Try: try}
	err = v.eng.Commands().Report(ctx, step, try, rep, "mcp", verdictWait)
	switch {
	case errors.Is(err, engine.ErrReportRefused):
		r := refusalOf(err)
		verdict.Reasons, verdict.Code = r.Reasons, r.Code
		return nil, verdict, r
	case errors.Is(err, engine.ErrNoVerdict):
		return nil, verdict, refuse(Busy, fmt.Sprintf("is the sidecar that holds %s running? (%v)", v.rt.WS.Dir, err))
	case err != nil:
		return nil, verdict, err
	}
	verdict.Accepted = true
	return nil, verdict, nil
}

// verdictWait bounds the wait for the sidecar's verdict on a dropped report.
const verdictWait = 30 * time.Second

// StepInput names a step.
type StepInput struct {
	Step string `json:"step" jsonschema:"the step id"`
	Run  string `json:"run,omitempty" jsonschema:"the run; default the workspace's own, state.json"`
}

// Queued says a request was taken.
type Queued struct {
	Step   string `json:"step"`
	Queued bool   `json:"queued"`
}

func (t *tools) retry(ctx context.Context, _ *sdk.CallToolRequest, in StepInput) (*sdk.CallToolResult, Queued, error) {
	return t.queue(ctx, in, engine.Commands.Retry)
}

func (t *tools) trigger(ctx context.Context, _ *sdk.CallToolRequest, in StepInput) (*sdk.CallToolResult, Queued, error) {
	return t.queue(ctx, in, engine.Commands.Trigger)
}

// queue asks the run's command surface for a retry or a trigger of a step.
func (t *tools) queue(ctx context.Context, in StepInput, ask func(engine.Commands, context.Context, string, string) (string, error)) (*sdk.CallToolResult, Queued, error) {
	v, err := t.runOf(in.Run)
	if err != nil {
		return nil, Queued{}, err
	}
	defer v.close()
	if err := t.arm(); err != nil {
		return nil, Queued{}, err
	}
	if _, err := ask(v.eng.Commands(), ctx, in.Step, "mcp"); err != nil {
		return nil, Queued{}, err
	}
	return nil, Queued{Step: in.Step, Queued: true}, nil
}
