package core

import (
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stepseq/stepseq/planspec"
)

// ErrorChars is how much of stderr or stdout the original keeps in the state.
const ErrorChars = 500

// Exit is how an agent process ended.
type Exit struct {
	Code     int    // -1 when it never ran or was killed by a signal
	Signal   Signal // the signal that ended it; nil when it exited
	TimedOut bool
	Stdout   string // the first bytes, enough for ErrorChars characters
	Stderr   string
	// StdoutTail and StderrTail are the last bytes (TailBytes), where CLIs print
	// their verdict: claude's JSON result, codex's turn.failed.
	StdoutTail string
	StderrTail string
	// Lines are the stdout lines the preset asked to keep wherever they fell
	// (proc.Spec.KeepLines), for its usage; a first "" says older ones were
	// dropped.
	Lines   []string
	Err     error // the agent could not be started, or waiting failed
	Started time.Time
	Ended   time.Time
}

// Signal is an os.Signal, named here so that the core need not import os: any
// os.Signal is one.
type Signal interface {
	String() string
	Signal()
}

// Verdict is the judgment of one try.
type Verdict struct {
	OK    bool
	Error string // FAILED: what goes into stepRuns[id].error
	// MissingOutputs lists the required outputs not found; with awaitOutputs the
	// driver may wait for them before judging again.
	MissingOutputs []string
}

// JudgeExit judges how a try's agent ended, before its outputs: the agent's own
// word that it failed (a preset's reading of its output, like claude's is_error),
// unless it timed out, then the exit (ended is true when either fails the try).
func JudgeExit(agentFailed string, exit Exit) (v Verdict, ended bool) {
	if agentFailed != "" && !exit.TimedOut {
		return Verdict{Error: FirstChars(agentFailed, ErrorChars)}, true
	}
	return exitVerdict(exit)
}

// exitVerdict judges how the agent ended: a timeout, a start failure or a non-zero
// exit fails the try (ended is true); an exit 0 is for the outputs to decide.
func exitVerdict(exit Exit) (v Verdict, ended bool) {
	switch {
	case exit.TimedOut:
		return Verdict{Error: "Timeout"}, true
	case exit.Err != nil:
		return Verdict{Error: FirstChars(exit.Err.Error(), ErrorChars)}, true
	case exit.Code != 0:
		return Verdict{Error: FirstChars(exit.Stderr, ErrorChars)}, true
	}
	return Verdict{}, false
}

// checkVerdict runs the step's check, when it has one.
func checkVerdict(spec *planspec.StepSpec, check func() (bool, error)) Verdict {
	if check == nil {
		return Verdict{OK: true}
	}
	ok, err := check()
	switch {
	case err != nil:
		return Verdict{Error: "Check " + spec.Check + " failed: " + err.Error()}
	case !ok:
		return Verdict{Error: "Check " + spec.Check + " is false"}
	}
	return Verdict{OK: true}
}

// Record writes the verdict of a try into its run, as the original's runner does,
// and keeps what stepseq adds: when the agent finished, and the artifacts produced.
func Record(st *planspec.State, id string, exit Exit, v Verdict, now time.Time) {
	run := st.Run(id)
	run.LastRunIso = planspec.FormatISO(now)
	if out := FirstChars(exit.Stdout, ErrorChars); out != "" {
		run.Stdout = &out
	}
	if run.Agent == nil {
		run.Agent = &planspec.AgentRecord{}
	}
	run.Agent.FinishedIso = run.LastRunIso
	if !v.OK {
		run.Status = planspec.StatusFailed
		e := v.Error
		run.Error = &e
		run.Agent.Errors = append(run.Agent.Errors, planspec.TryError{Try: run.Tries, Error: e})
		if n := len(run.Agent.Errors); n > planspec.MaxTryErrorsKept {
			run.Agent.Errors = slices.Delete(run.Agent.Errors, 0, n-planspec.MaxTryErrorsKept)
		}
		return
	}
	run.Status = planspec.StatusDone
	run.Error = nil
	if spec := st.Steps[id]; spec != nil {
		for _, p := range spec.RequiredOutputs {
			if !slices.Contains(st.Artifacts, p) {
				st.Artifacts = append(st.Artifacts, p)
			}
		}
	}
}

// FirstChars keeps the first n characters of s, as Python's s[:n] does, replacing
// bytes that are not UTF-8.
func FirstChars(s string, n int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}
