package planspec

import (
	"errors"
	"fmt"
	"strings"
)

// A Word is one of the few a field takes, with what it does ("" when the Word
// says it). Each field's words are listed once, here: the plan's decoder, the
// state's decoder and the plan's JSON Schema read them from these lists.
type Word struct{ text, means string }

var (
	ReportsWords = []Word{
		{ReportsRequired, "the worker must report; without a done report the try fails"},
		{ReportsOptional, "reports are honoured when they come"},
	}
	OnInvalidWords = []Word{
		{OnInvalidRetry, "the try stays open for a corrected report"},
		{OnInvalidAbort, "the try fails"},
	}
	OnMaxWords = []Word{
		{OnMaxBlock, "the plan is blocked: did not converge"},
		{OnMaxDone, "the plan goes on"},
	}
	// Written out, not made from lists at init: package init costs every command.
	runStatusWords    = []Word{{StatusPending, ""}, {StatusInProgress, ""}, {StatusDone, ""}, {StatusFailed, ""}}
	runPhaseWords     = []Word{{PhasePlanned, ""}, {PhaseDispatching, ""}, {PhaseInProgress, ""}, {PhaseBlocked, ""}, {PhaseReviewing, ""}, {PhaseDone, ""}, {PhaseWaiting, ""}, {PhaseAwaitingApproval, ""}}
	reportStatusWords = []Word{{ReportAccepted, ""}, {ReportMilestone, ""}, {ReportBlocked, ""}, {ReportDone, ""}}
)

// Texts are the words alone, as a JSON Schema's enum lists them.
func Texts(words []Word) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = w.text
	}
	return out
}

// CheckWord is nil when s is one of words; otherwise it says which words the
// field takes, with what each does, the value given and the word it is close
// to, if any: want block (…) or done (…), got "blok": did you mean "block"?
func CheckWord(s string, words []Word) error {
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
	fmt.Fprintf(&b, ", got %q", Clip(s, 40))
	if near := Suggest(s, Texts(words)); near != "" {
		fmt.Fprintf(&b, ": did you mean %q?", near)
	}
	return errors.New(b.String())
}

// oneOf reads a member that is one of words and may be absent, null or empty
// (""); "" when it is refused (reported).
func (d *stateDecoder) oneOf(o object, prefix, key string, words []Word) string {
	return d.optWord(o, prefix, key, func(s string) error { return CheckWord(s, words) })
}

// Suggest returns the candidate closest to word when it is close enough to be a
// typo: a different case, or an edit distance of at most a third of its length.
func Suggest(word string, candidates []string) string {
	best, bestDist := "", len(word)/3+1
	for _, c := range candidates {
		if strings.EqualFold(c, word) || isPlural(strings.ToLower(c), strings.ToLower(word)) {
			return c
		}
		if d := editDistance(strings.ToLower(word), strings.ToLower(c)); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// isPlural reports whether plural is word's English plural (maxRetry, maxRetries;
// requiredOutput, requiredOutputs): a key written in the singular is a typo that
// edit distance alone can miss.
func isPlural(plural, word string) bool {
	return plural == word+"s" || strings.HasSuffix(word, "y") && plural == word[:len(word)-1]+"ies"
}

// editDistance is the optimal string alignment distance (Levenshtein with
// transpositions: "titel" is one edit from "title"), on bytes: keys are ASCII.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return max(len(a), len(b)) // no key is that long; do not spend time on it
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
