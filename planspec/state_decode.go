package planspec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// stateDecoder turns the members of a state file into typed fields, collecting a
// located error for every member of the wrong shape.
type stateDecoder struct {
	file string
	errs StateErrors
	// readOnly: the state will not be written back, so the encoding of its plan
	// and runs is not remembered (see encodeMemo).
	readOnly bool
	spans    spans // of the whole file
}

func (d *stateDecoder) fail(key, format string, args ...any) {
	d.errs = append(d.errs, &StateError{File: d.file, Key: key, Msg: fmt.Sprintf(format, args...)})
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

func (d *stateDecoder) object(key string, raw json.RawMessage) (object, bool) {
	o, err := d.spans.parseObject(raw)
	if err != nil {
		d.fail(key, "want an object, got %s", describe(raw))
		return object{vals: map[string]json.RawMessage{}}, false
	}
	return o, true
}

func (d *stateDecoder) str(key string, raw json.RawMessage) string {
	if s, ok := plainString(raw); ok {
		return s
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		d.fail(key, "want a string, got %s", describe(raw))
	}
	return s
}

// optStr reads a string member that may be absent or null.
func (d *stateDecoder) optStr(o object, prefix, key string) (string, bool) {
	raw, ok := o.vals[key]
	if !ok || isNull(raw) {
		return "", false
	}
	if s, ok := plainString(raw); ok {
		return s, true // without naming the key, which only an error needs
	}
	return d.str(prefix+key, raw), true
}

func (d *stateDecoder) strList(key string, raw json.RawMessage) []string {
	if isNull(raw) {
		return nil
	}
	out := []string{}
	l, more, ok := openList(raw, '[', ']')
	for more {
		end := d.spans.valueEnd(raw, l.at)
		if end >= 0 {
			it := raw[l.at:end]
			s, plain := plainString(it)
			if !plain {
				s = d.str(fmt.Sprintf("%s[%d]", key, len(out)), it)
			}
			out = append(out, s)
		}
		more, ok = l.next(end)
	}
	if !ok { // not a list: raw is valid JSON
		d.fail(key, "want a list of strings, got %s", describe(raw))
		return nil
	}
	return out
}

func (d *stateDecoder) number(key string, raw json.RawMessage) (float64, bool) {
	var n json.Number
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || (t[0] != '-' && (t[0] < '0' || t[0] > '9')) {
		d.fail(key, "want a number, got %s", describe(raw))
		return 0, false
	}
	if err := json.Unmarshal(t, &n); err != nil {
		d.fail(key, "want a number, got %s", describe(raw))
		return 0, false
	}
	f, err := n.Float64()
	if err != nil || math.IsInf(f, 0) {
		d.fail(key, "number %s is out of range", n)
		return 0, false
	}
	return f, true
}

// count reads a whole number ≥ 0 (tries, currentStep, retries).
func (d *stateDecoder) count(key string, raw json.RawMessage) int {
	f, ok := d.number(key, raw)
	if !ok {
		return 0
	}
	if f != math.Trunc(f) || f < 0 || f > math.MaxInt32 {
		d.fail(key, "want a whole number ≥ 0, got %v", f)
		return 0
	}
	return int(f)
}

func (d *stateDecoder) duration(key string, raw json.RawMessage) Duration {
	s := d.str(key, raw)
	if s == "" {
		return 0
	}
	v, err := ParseDuration(s)
	if err != nil {
		d.fail(key, "%v", err)
	}
	return v
}

func (d *stateDecoder) iso(key, s string) {
	if _, err := ParseISO(s); err != nil {
		d.fail(key, "%v", err)
	}
}

func (d *stateDecoder) state(data []byte) *State {
	st := NewState()
	top, ok := d.object("", data)
	if !ok {
		d.errs[len(d.errs)-1].Msg = "want a JSON object at the top, got " + describe(data)
		return st
	}
	st.raw = top
	v := top.vals
	if raw, ok := v["plan"]; ok && !isNull(raw) {
		d.plan(st, raw)
	}
	if raw, ok := v["stepQueue"]; ok {
		st.StepQueue = nonNil(d.strList("stepQueue", raw))
	}
	if raw, ok := v["currentStep"]; ok && !isNull(raw) {
		st.CurrentStep = d.currentStep(raw)
	}
	if raw, ok := v["stepRuns"]; ok && !isNull(raw) {
		d.stepRuns(st, raw)
	}
	if raw, ok := v["stepDelayMinutes"]; ok && !isNull(raw) {
		st.StepDelayMinutes = d.stepDelay(raw)
	}
	if raw, ok := v["blockers"]; ok {
		st.Blockers = nonNil(d.strList("blockers", raw))
	}
	if s, ok := d.optStr(top, "", "lastHeartbeatIso"); ok {
		st.LastHeartbeatIso = s
	}
	if raw, ok := v["artifacts"]; ok {
		st.Artifacts = nonNil(d.strList("artifacts", raw))
	}
	if s, ok := d.optStr(top, "", "status"); ok {
		st.Status = s
	}
	if raw, ok := v["stepseq"]; ok && !isNull(raw) {
		st.Settings = d.settings("stepseq", raw)
	}
	if raw, ok := v["plan"]; ok && len(d.errs) == 0 && !d.readOnly {
		st.memo.rememberPlan(st, raw)
	}
	d.checkQueue(st)
	d.checkGroups(st)
	return st
}

// plan reads plan.steps, each step's spec in the file's order.
func (d *stateDecoder) plan(st *State, raw json.RawMessage) {
	st.planRaw, _ = d.object("plan", raw)
	sraw, ok := st.planRaw.vals["steps"]
	if !ok || isNull(sraw) {
		return
	}
	steps, _ := d.object("plan.steps", sraw)
	st.memo.stepsOrder = steps.keys
	st.Steps = make(map[string]*StepSpec, len(steps.keys))
	for _, id := range steps.keys {
		if strings.ContainsRune(id, 0) {
			// Refused here, not at launch: no agent can be told this id
			// (STEPSEQ_STEP), and each launch would spend a try on it.
			d.fail("plan.steps", "step id %q contains a NUL byte, which no agent can be given: rename the step (and its stepQueue entry)", Clip(id, 60))
		}
		st.Steps[id] = d.stepSpec("plan.steps."+id, steps.vals[id])
	}
}

// currentStep is the cursor: a whole number, an index into stepQueue.
func (d *stateDecoder) currentStep(raw json.RawMessage) int {
	f, ok := d.number("currentStep", raw)
	switch {
	case !ok:
	case f != math.Trunc(f) || f < 0 || f > math.MaxInt32:
		d.fail("currentStep", "want a whole number ≥ 0 (an index into stepQueue), got %v", f)
	default:
		return int(f)
	}
	return 0
}

// stepRuns reads every step's run record, in the file's order.
func (d *stateDecoder) stepRuns(st *State, raw json.RawMessage) {
	runs, _ := d.object("stepRuns", raw)
	st.memo.runOrder = runs.keys
	st.StepRuns = make(map[string]*StepRun, len(runs.keys))
	for _, id := range runs.keys {
		st.StepRuns[id] = d.stepRun("stepRuns."+id, runs.vals[id])
		if !d.readOnly {
			st.memo.rememberRun(id, st.StepRuns[id], runs.vals[id])
		}
	}
}

// stepDelay is stepDelayMinutes: minutes ≥ 0.
func (d *stateDecoder) stepDelay(raw json.RawMessage) float64 {
	f, ok := d.number("stepDelayMinutes", raw)
	if !ok {
		return 0
	}
	if f < 0 {
		d.fail("stepDelayMinutes", "want minutes ≥ 0 (0 = no delay), got %v", f)
	}
	return f
}

// checkQueue refuses a queued step the plan does not have.
func (d *stateDecoder) checkQueue(st *State) {
	for i, id := range st.StepQueue {
		if _, ok := st.Steps[id]; !ok {
			d.fail(fmt.Sprintf("stepQueue[%d]", i), "step %q is queued but missing from plan.steps: add it there or remove it from stepQueue", id)
		}
	}
}

func (d *stateDecoder) stepSpec(key string, raw json.RawMessage) *StepSpec {
	sp := &StepSpec{}
	o, ok := d.object(key, raw)
	if !ok {
		return sp
	}
	sp.raw = o
	p := key + "."
	sp.Title, _ = d.optStr(o, p, "title")
	sp.Instruction, _ = d.optStr(o, p, "instruction")
	sp.InstructionTemplate, _ = d.optStr(o, p, "instructionTemplate")
	sp.TitleTemplate, _ = d.optStr(o, p, "titleTemplate")
	// The original's runner reads required_outputs too, when requiredOutputs is
	// not there: a step so written has outputs to check all the same.
	for _, k := range []string{"requiredOutputs", "required_outputs"} {
		if r, ok := o.vals[k]; ok {
			sp.RequiredOutputs = d.strList(p+k, r)
			break
		}
	}
	sp.When, _ = d.optStr(o, p, "when")
	sp.Skip, _ = d.optStr(o, p, "skip")
	sp.Check, _ = d.optStr(o, p, "check")
	sp.Exit, _ = d.optStr(o, p, "exit")
	sp.Abort, _ = d.optStr(o, p, "abort")
	sp.AbortReason, _ = d.optStr(o, p, "abortReason")
	if r, ok := o.vals["on"]; ok {
		sp.On = d.strList(p+"on", r)
	}
	d.runSettings(o, p, sp.RunSettings())
	sp.AwaitOutputs = d.optDuration(o, p, "awaitOutputs")
	sp.Retries = d.optCount(o, p, "retries")
	if r, ok := o.vals["agentTemplate"]; ok {
		sp.AgentTemplate = d.agent(p+"agentTemplate", r)
	}
	if r, ok := o.vals["result"]; ok && !isNull(r) {
		sp.Result = compactJSON(r)
	}
	if b, ok := d.optBool(o, p, "resume"); ok {
		sp.Resume = &b
	}
	sp.ResultFrom = d.optWord(o, p, "resultFrom", CheckResultFrom)
	sp.OnInvalid = d.oneOf(o, p, "onInvalid", OnInvalidWords)
	sp.Approve = d.approval(o, p, "approve", true)
	d.graph(o, p, &sp.Graph)
	d.optJSON(o, p, "budget", &sp.Budget, "a budget {usd, tokens, tries, wall}")
	return sp
}

func (d *stateDecoder) stepRun(key string, raw json.RawMessage) *StepRun {
	r := &StepRun{Status: StatusPending}
	o, ok := d.object(key, raw)
	if !ok {
		return r
	}
	r.raw = o
	p := key + "."
	if s, ok := d.optStr(o, p, "status"); ok {
		if err := CheckWord(s, runStatusWords); err != nil {
			d.fail(p+"status", "%v", err)
		} else {
			r.Status = s
		}
	}
	if n := d.optCount(o, p, "tries"); n != nil {
		r.Tries = *n
	}
	if s, ok := d.optStr(o, p, "lastRunIso"); ok {
		r.LastRunIso = s
		if s != "" {
			d.iso(p+"lastRunIso", s)
		}
	}
	if s, ok := d.optStr(o, p, "stdout"); ok {
		r.Stdout = &s
	}
	if s, ok := d.optStr(o, p, "error"); ok {
		r.Error = &s
	}
	r.Skipped, _ = d.optBool(o, p, "skipped")
	r.Phase = d.oneOf(o, p, "phase", runPhaseWords)
	if v, ok := o.vals["reports"]; ok && !isNull(v) {
		if err := json.Unmarshal(v, &r.Reports); err != nil {
			d.fail(p+"reports", "want a list of reports {time, try, status, summary, evidence, risk, next}: %v", err)
		}
	}
	if v, ok := o.vals["result"]; ok && !isNull(v) {
		r.Result = compactJSON(v)
	}
	if v, ok := o.vals["stepseq"]; ok && !isNull(v) {
		var a AgentRecord
		if err := json.Unmarshal(v, &a); err != nil {
			d.fail(p+"stepseq", "want stepseq's try record {startedIso, finishedIso, interruptions}: %v", err)
		} else {
			r.Agent = &a
		}
	}
	r.Gate = d.gate(o, p, "approval")
	r.Foreach, _ = d.optBool(o, p, "foreach")
	if v, ok := o.vals["failed"]; ok {
		r.Failed = d.strList(p+"failed", v)
	}
	r.impliedByRecord()
	return r
}

// optCount reads a whole number ≥ 0 that may be absent or null (nil).
func (d *stateDecoder) optCount(o object, prefix, key string) *int {
	r, ok := o.vals[key]
	if !ok || isNull(r) {
		return nil
	}
	n := d.count(prefix+key, r)
	return &n
}

// optJSON decodes a member that may be absent or null into into; what it wants
// is said when it is not that.
func (d *stateDecoder) optJSON(o object, prefix, key string, into any, want string) {
	r, ok := o.vals[key]
	if !ok || isNull(r) {
		return
	}
	if err := json.Unmarshal(r, into); err != nil {
		d.fail(prefix+key, "want %s, got %s", want, describe(r))
	}
}

// optWord reads a string member that check accepts; "" when it is absent, null,
// empty or refused (the refusal is reported).
func (d *stateDecoder) optWord(o object, prefix, key string, check func(string) error) string {
	s, ok := d.optStr(o, prefix, key)
	if !ok || s == "" {
		return ""
	}
	if err := check(s); err != nil {
		d.fail(prefix+key, "%v", err)
		return ""
	}
	return s
}

func (d *stateDecoder) settings(key string, raw json.RawMessage) Settings {
	var st Settings
	o, ok := d.object(key, raw)
	if !ok {
		return st
	}
	st.raw = o
	p := key + "."
	st.Name, _ = d.optStr(o, p, "name")
	d.runSettings(o, p, st.RunSettings())
	st.MaxRetries = d.optCount(o, p, "maxRetries")
	d.optJSON(o, p, "vars", &st.Vars, "an object")
	d.optJSON(o, p, "summary", &st.Summary, "an object of names to expressions")
	d.optJSON(o, p, "summaryValues", &st.SummaryValues, "an object")
	d.optJSON(o, p, "params", &st.Params, "an object")
	for k, v := range st.Params {
		st.Params[k] = WholeNumbers(v)
	}
	st.Heartbeat = d.optDuration(o, p, "heartbeat")
	st.Resume, _ = d.optBool(o, p, "resume")
	if n := d.optCount(o, p, "maxParallel"); n != nil {
		st.MaxParallel = *n
	}
	if r, ok := o.vals["notify"]; ok && !isNull(r) {
		st.Notify = d.notify(p+"notify", r)
	}
	if r, ok := o.vals["groups"]; ok && !isNull(r) {
		st.Groups = d.groups(p+"groups", r)
	}
	if r, ok := o.vals["loops"]; ok && !isNull(r) {
		st.Loops = d.loops(p+"loops", r)
	}
	st.Source, _ = d.optStr(o, p, "source")
	st.Hash, _ = d.optStr(o, p, "hash")
	st.RunID, _ = d.optStr(o, p, "runId")
	st.Face, _ = d.optStr(o, p, "face")
	st.Approval = d.approval(o, p, "approval", ApprovalRequired)
	st.Gate = d.gate(o, p, "gate")
	d.optJSON(o, p, "budget", &st.Budget, "a budget {usd, tokens, tries, wall}")
	d.optJSON(o, p, "spend", &st.Spend, "the run's spend {tries, inputTokens, outputTokens, cacheTokens, costUsd}")
	st.BudgetHeld, _ = d.optStr(o, p, "budgetHeld")
	if r, ok := o.vals["applied"]; ok && !isNull(r) {
		st.Applied = d.strList(p+"applied", r)
	}
	if r, ok := o.vals["prices"]; ok && !isNull(r) {
		prices, err := ParsePrices(r)
		if err != nil {
			d.fail(p+"prices", "%v", err)
		}
		st.Prices = prices
	}
	if name, ok := o.vals["name"]; ok && strings.TrimSpace(st.Name) == "" && !isNull(name) {
		d.fail(p+"name", "want a non-empty name")
	}
	return st
}

// optBool reads a true or false member that may be absent or null.
func (d *stateDecoder) optBool(o object, prefix, key string) (bool, bool) {
	raw, ok := o.vals[key]
	if !ok || isNull(raw) {
		return false, false
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		d.fail(prefix+key, "want true or false, got %s", describe(raw))
		return false, false
	}
	return b, true
}

func (d *stateDecoder) optDuration(o object, prefix, key string) Duration {
	if r, ok := o.vals[key]; ok && !isNull(r) {
		return d.duration(prefix+key, r)
	}
	return 0
}

func (d *stateDecoder) notify(key string, raw json.RawMessage) []NotifySink {
	var sinks []NotifySink
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sinks); err != nil {
		d.fail(key, "want a list of sinks, each {command: [argv]} or {webhook: URL}: %v", err)
		return nil
	}
	for i, s := range sinks {
		if err := s.Check(); err != nil {
			d.fail(fmt.Sprintf("%s[%d]", key, i), "%v", err)
		}
	}
	return sinks
}

// compactJSON is a raw member without its indentation, as it is written back.
func compactJSON(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return slices.Clone(raw)
	}
	return b.Bytes()
}

// WholeNumbers turns the whole float64s of a JSON value into ints, so that a
// param the schema calls an integer is one when an expression reads it (JSON
// reads every number as a float64, and expr's % takes integers only).
func WholeNumbers(v any) any {
	switch v := v.(type) {
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int(v)
		}
	case map[string]any:
		for k, e := range v {
			v[k] = WholeNumbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = WholeNumbers(e)
		}
	}
	return v
}
