package planspec

import (
	"errors"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// A word is one of the few a field takes, with what it does ("" when the word
// says it). Each field's words are listed once, here: the plan's decoder, the
// state's decoder and the plan's JSON Schema read them from these lists.
type word struct{ text, means string }

var (
	reportsWords = []word{
		{ReportsRequired, "the worker must report; without a done report the try fails"},
		{ReportsOptional, "reports are honoured when they come"},
	}
	onInvalidWords = []word{
		{OnInvalidRetry, "the try stays open for a corrected report"},
		{OnInvalidAbort, "the try fails"},
	}
	onMaxWords = []word{
		{OnMaxBlock, "the plan is blocked: did not converge"},
		{OnMaxDone, "the plan goes on"},
	}
	// Written out, not made from lists at init: package init costs every command.
	runStatusWords    = []word{{StatusPending, ""}, {StatusInProgress, ""}, {StatusDone, ""}, {StatusFailed, ""}}
	runPhaseWords     = []word{{PhasePlanned, ""}, {PhaseDispatching, ""}, {PhaseInProgress, ""}, {PhaseBlocked, ""}, {PhaseReviewing, ""}, {PhaseDone, ""}, {PhaseWaiting, ""}}
	reportStatusWords = []word{{ReportAccepted, ""}, {ReportMilestone, ""}, {ReportBlocked, ""}, {ReportDone, ""}}
)

// texts are the words alone, as a JSON Schema's enum lists them.
func texts(words []word) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = w.text
	}
	return out
}

// checkWord is nil when s is one of words; otherwise it says which words the
// field takes, with what each does, the value given and the word it is close
// to, if any: want block (…) or done (…), got "blok": did you mean "block"?
func checkWord(s string, words []word) error {
	for _, w := range words {
		if s == w.text {
			return nil
		}
	}
	var b strings.Builder
	b.WriteString("want ")
	for i, w := range words {
		switch {
		case i == 0:
		case i == len(words)-1:
			b.WriteString(" or ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(w.text)
		if w.means != "" {
			b.WriteString(" (" + w.means + ")")
		}
	}
	fmt.Fprintf(&b, ", got %q", clip(s, 40))
	if near := suggest(s, texts(words)); near != "" {
		fmt.Fprintf(&b, ": did you mean %q?", near)
	}
	return errors.New(b.String())
}

// oneOf reads a string that is one of words; "" when it is not (reported).
func (d *planDecoder) oneOf(n *yaml.Node, field string, words []word) string {
	s, ok := d.str(n, field)
	if !ok {
		return ""
	}
	if err := checkWord(s, words); err != nil {
		d.fail(n, field, "%s: %v", lastKey(field), err)
		return ""
	}
	return s
}

// oneOf reads a member that is one of words and may be absent, null or empty
// (""); "" when it is refused (reported).
func (d *stateDecoder) oneOf(o object, prefix, key string, words []word) string {
	return d.optWord(o, prefix, key, func(s string) error { return checkWord(s, words) })
}
