package core

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/stepseq/stepseq/planspec"
)

// A step's result schema: a done report's result must satisfy it.
// With onInvalid: retry an invalid result is refused with every schema error and
// the try stays open for a corrected report, planspec.MaxInvalidResults times;
// with abort, or past that bound, the try fails with the errors.

// resultProblems are the schema errors of a done report's result; nil when the
// step has no schema or the result satisfies it.
func (m *Machine) resultProblems(id string, rep planspec.WorkerReport) []string {
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
	case left == 1:
		head += "; send done again with a corrected result (the last correction: another invalid result fails the try)"
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
		// The user hears of it once, with the try's verdict when its agent is
		// stopped (one transition, one report).
		m.emit(StopAgent{Step: r.step, Try: r.try, Reason: r.stopReason})
	}
}

// resultVerdict is the result's part of a finished try's verification: a
// step with a schema needs a result that satisfies it, from an accepted done
// report, else from where resultFrom says; a resultFrom that
// gives none fails the try with the reason. The result found is kept on t for
// keepResult.
func (m *Machine) resultVerdict(t *tryExit) []string {
	sp := m.st.Steps[t.step]
	if sp == nil {
		return nil
	}
	if rec, ok := lastDone(m.st.Run(t.step), t.try); ok && len(rec.Result) > 0 {
		t.kept = json.RawMessage(rec.Result)
		if bad := m.resultProblems(t.step, rec.WorkerReport); len(bad) > 0 {
			return []string{"result: " + strings.Join(bad, "; ")}
		}
		return nil
	}
	if sp.ResultFrom == "" {
		if len(sp.Result) == 0 {
			return nil
		}
		return []string{"no done report with a result: the step's result schema needs one"}
	}
	raw, err := m.resultFrom(t, sp.ResultFrom)
	if err != "" {
		return []string{"resultFrom: " + sp.ResultFrom + ": " + err}
	}
	t.kept = raw
	if bad := m.resultProblems(t.step, planspec.WorkerReport{Result: raw}); len(bad) > 0 {
		return []string{"result from " + sp.ResultFrom + ": " + strings.Join(bad, "; ")}
	}
	return nil
}

// ResultFiles is what a Probe answers when it can read a step's result file
// (resultFrom: file:PATH): its bytes, read through the workspace root with the
// result cap.
type ResultFiles interface {
	ResultFile(rel string) ([]byte, error)
}

// resultFrom is the result a try's resultFrom names: the one read from the
// agent's output as it exited, or the file as it is now. err says why there is
// none.
func (m *Machine) resultFrom(t *tryExit, from string) (json.RawMessage, string) {
	if from == planspec.ResultFromOutput {
		if t.resultErr != "" {
			return nil, t.resultErr
		}
		if len(t.result) == 0 {
			return nil, "the agent's output gave no result"
		}
		return t.result, ""
	}
	rel := strings.TrimPrefix(from, planspec.ResultFromFile)
	rf, ok := m.cfg.Probe.(ResultFiles)
	if !ok {
		return nil, "this driver cannot read workspace files"
	}
	data, err := rf.ResultFile(rel)
	if err != nil {
		return nil, err.Error()
	}
	raw, err := planspec.ParseResultFile(data, rel)
	if err == nil {
		err = planspec.CheckResultSize(raw, rel)
	}
	if err != nil {
		return nil, err.Error()
	}
	return raw, ""
}

// hasResultFrom reports whether step id's result may come from its output or a
// file when its done report carries none.
func hasResultFrom(st *planspec.State, id string) bool {
	sp := st.Steps[id]
	return sp != nil && sp.ResultFrom != ""
}

// keepResult records the result of a verified try in its run record, for
// status, MCP and conditions (steps.ID.result): its done report's, else the
// one its resultFrom gave.
func keepResult(run *planspec.StepRun, t *tryExit) {
	if rec, ok := lastDone(run, t.try); ok && len(rec.Result) > 0 {
		run.Result = slices.Clone(json.RawMessage(rec.Result))
	} else if len(t.kept) > 0 {
		run.Result = slices.Clone(t.kept)
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
