package plan

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
