package engine

import "regexp"

// stepCommand is a stepseq command on a step, or on the run's budget, that a
// hint names.
var stepCommand = regexp.MustCompile("(stepseq (?:retry|trigger) [A-Za-z0-9._-]+|stepseq budget [a-z]+=[+]?[0-9.]+[a-z]*)")

// commandsForRun makes the stepseq commands a hint names reach run, a named
// one: `stepseq retry stuck` alone would act on the workspace's own run.
func commandsForRun(hint, run string) string {
	return stepCommand.ReplaceAllString(hint, "${1} --run "+run)
}

// refusalForRun is a command's refusal with the commands it names made to
// reach run, a named one ("": the workspace's own, left as it is): `stepseq
// trigger s` alone, in the refusal of a retry of run stuck, acts on state.json.
func refusalForRun(err error, run string) error {
	r := RefusalOf(err)
	if r == nil {
		return nil
	}
	if run == "" {
		return r
	}
	out := &Refusal{Code: r.Code, Reasons: make([]string, len(r.Reasons))}
	for i, reason := range r.Reasons {
		out.Reasons[i] = commandsForRun(reason, run)
	}
	if r.Err != nil {
		out.Err = &hintedError{err: r.Err, text: commandsForRun(r.Err.Error(), run)}
	}
	return out
}

// hintedError is err with its text's commands made to reach a named run;
// errors.Is and errors.As see err.
type hintedError struct {
	err  error
	text string
}

func (e *hintedError) Error() string { return e.text }
func (e *hintedError) Unwrap() error { return e.err }
