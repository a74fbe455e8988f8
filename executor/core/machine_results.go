package core

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/stepseq/stepseq/planspec"
)

// A step's result schema (DESIGN §7, §9): a done report's result must satisfy it.
// With onInvalid: retry an invalid result is refused with every schema error and
// the try stays open for a corrected report, planspec.MaxInvalidResults times;
// with abort, or past that bound, the try fails with the errors.

// resultProblems are the schema errors of a done report's result; nil when the
// step has no schema or the result satisfies it.
func (m *Machine) resultProblems(id string, rep planspec.Report) []string {
	rs, err := m.st.ResultSchema(id)
	if err != nil {
		return []string{err.Error()}
	}
	if rs == nil {
		return nil
	}
	return rs.Validate(rep.Result)
}

// invalidResult refuses a done report whose result fails the schema and, with
// abort or once the corrections are spent, stops the try with the errors.
func (m *Machine) invalidResult(r *tryRun, in ReportIn, errs []string) {
	r.invalidResults++
	r.lastReport = m.now // the worker is alive: an invalid result is not silence
	mode := m.st.OnInvalidMode(in.Step)
	left := planspec.MaxInvalidResults - r.invalidResults + 1
	head := "result does not satisfy the step's result schema"
	abort := mode == planspec.OnInvalidAbort || left <= 0
	switch {
	case mode == planspec.OnInvalidAbort:
		head += " (onInvalid: abort): the try fails"
	case left <= 0:
		head += fmt.Sprintf(" (%d invalid results: onInvalid: retry allows %d corrections): the try fails", r.invalidResults, planspec.MaxInvalidResults)
	default:
		head += fmt.Sprintf("; send done again with a corrected result (%d more allowed)", left-1)
	}
	reasons := append([]string{head}, errs...)
	m.journal(Entry{Event: "result-invalid", Step: in.Step, Try: r.try, Reason: strings.Join(errs, "; "),
		Detail: map[string]any{"via": in.Via, "onInvalid": mode, "count": r.invalidResults}})
	m.log(slog.LevelWarn, "result refused", "step", in.Step, "try", r.try, "errors", strings.Join(errs, "; "))
	m.emit(ReportVerdict{Ref: in.Ref, Step: in.Step, Reasons: reasons})
	if abort && r.stopReason == "" {
		r.stopReason = "invalid result: " + strings.Join(errs, "; ")
		m.notifyEvent(in.Step, r.try, planspec.ReportMilestone, EventTryFailed, FirstChars(r.stopReason, ErrorChars), "retry by the usual rules")
		m.emit(StopAgent{Step: r.step, Try: r.try, Reason: r.stopReason})
	}
}

// resultVerdict is the result schema's part of a finished try's verification: a
// step with a schema needs an accepted done report with a result.
func (m *Machine) resultVerdict(t *tryExit) []string {
	if sp := m.st.Steps[t.step]; sp == nil || len(sp.Result) == 0 {
		return nil
	}
	rec, ok := lastDone(m.st.Run(t.step), t.try)
	if !ok {
		return []string{"no done report with a result: the step's result schema needs one"}
	}
	if bad := m.resultProblems(t.step, rec.Report); len(bad) > 0 {
		return []string{"result: " + strings.Join(bad, "; ")}
	}
	return nil
}

// keepResult records the accepted result of a verified try in its run record, for
// status, MCP and conditions (steps.ID.result).
func keepResult(run *planspec.StepRun, t *tryExit) {
	if rec, ok := lastDone(run, t.try); ok && len(rec.Result) > 0 {
		run.Result = slices.Clone(json.RawMessage(rec.Result))
	}
}

func lastDone(run *planspec.StepRun, try int) (planspec.ReportRecord, bool) {
	for i := len(run.Reports) - 1; i >= 0; i-- {
		if r := run.Reports[i]; r.Try == try && r.Status == planspec.ReportDone {
			return r, true
		}
	}
	return planspec.ReportRecord{}, false
}
