package planspec

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/go-multierror"
)

// ErrInvalidPlan is matched by every PlanError.
var ErrInvalidPlan = errors.New("planspec: invalid plan")

// PlanError is one problem in a plan file, located.
type PlanError struct {
	File      string
	Line, Col int    // 1-based
	Field     string // where in the plan, e.g. steps[2].when
	Msg       string // what is wrong and what would be right
	Err       error  // the cause when it has a sentinel of its own (ErrAgentRunsCode), else nil
}

func (e *PlanError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
}

func (e *PlanError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalidPlan, e.Err}
	}
	return []error{ErrInvalidPlan}
}

// maxPlanErrors bounds the report on a file that is not a plan at all.
const maxPlanErrors = 1000

// planErrors collects every problem of one plan and hands them back as one
// *multierror.Error, sorted by position, one line each.
func planErrors(errs []*PlanError) error {
	if len(errs) == 0 {
		return nil
	}
	slices.SortStableFunc(errs, func(a, b *PlanError) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
	})
	if len(errs) > maxPlanErrors {
		rest := errs[maxPlanErrors]
		errs = append(errs[:maxPlanErrors:maxPlanErrors], &PlanError{File: rest.File, Line: rest.Line, Col: rest.Col,
			Msg: fmt.Sprintf("%d more errors not shown: fix these first", len(errs)-maxPlanErrors)})
	}
	me := &multierror.Error{ErrorFormat: lineFormat}
	for _, e := range errs {
		me.Errors = append(me.Errors, e)
	}
	return me
}

// lineFormat writes one error a line, as compilers do, so that editors and
// `grep` understand the output; go-multierror's default is a bulleted paragraph.
func lineFormat(errs []error) string {
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// suggest returns the candidate closest to word when it is close enough to be a
// typo: a different case, or an edit distance of at most a third of its length.
func suggest(word string, candidates []string) string {
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
