package plan

import (
	"errors"
	"fmt"
	"strings"
)

// An evaluation error goes to state.json, status, MCP, the journal and the log,
// and the environment holds tokens. Once an expression reads env(), any word of
// its error may come from there: the value itself, or the value converted,
// sliced, split and joined, upper-cased. Masking the values cannot keep up with
// what an expression can make of them, so such an expression's error is
// replaced whole: the expression as written (the plan's text, not the
// environment's) and the kind of failure, a word from a fixed list.

// envHidden ends the error of an expression that reads env().
const envHidden = " (the expression reads env(), so what it evaluated is not shown)"

// Failure kinds of an expression that reads env(), told by the start of expr's
// message, which is fixed text: a value can appear only after it.
const (
	failConversion = "type conversion failed"
	failOperation  = "invalid operation on the values' types"
	failIndex      = "index or slice out of range"
	failMember     = "no such member"
	failMemory     = "memory budget exceeded"
	failDivision   = "division by zero"
	failRegexp     = "invalid regular expression"
	failRead       = "cannot read the file (over the size limit, not JSON, or too many glob matches)"
	failNotBool    = "gave a value that is not true or false"
	failOther      = "evaluation failed"
)

// failureKinds are every kind a tainted error can name.
var failureKinds = []string{failConversion, failOperation, failIndex, failMember, failMemory, failDivision,
	failRegexp, failRead, failNotBool, failOther}

// failurePrefixes tell a kind by how expr's (and Go's) message starts, most
// specific first.
var failurePrefixes = []struct{ prefix, kind string }{
	{"invalid operation: int(", failConversion},
	{"invalid operation: int64(", failConversion},
	{"invalid operation: float(", failConversion},
	{"invalid operation: bool(", failConversion},
	{"strconv.", failConversion},
	{"invalid operation: ", failOperation},
	{"operator ", failOperation},
	{"invalid argument for ", failOperation},
	{"index out of range", failIndex},
	{"cannot slice", failIndex},
	{"runtime error: index out of range", failIndex},
	{"runtime error: slice bounds out of range", failIndex},
	{"cannot fetch ", failMember},
	{"cannot get ", failMember},
	{"memory budget exceeded", failMemory},
	{"runtime error: integer divide by zero", failDivision},
	{"error parsing regexp", failRegexp},
}

// failureKind is the kind of failure expr's message msg tells.
func failureKind(msg string) string {
	for _, p := range failurePrefixes {
		if strings.HasPrefix(msg, p.prefix) {
			return p.kind
		}
	}
	return failOther
}

// envTaintedError is the error of an expression that reads env(): its source
// and the kind of what failed, nothing the evaluation saw. It wraps only the
// package's sentinels, so that errors.Is still matches them and nothing else
// can be unwrapped.
func envTaintedError(src, kind string, err error) error {
	ce := &ConditionError{Source: src}
	if errors.Is(err, ErrConditionRead) {
		kind, ce.Err = failRead, ErrConditionRead
	}
	ce.Msg = kind + envHidden
	return ce
}

// evalError is the ConditionError of an evaluation that failed with err:
// located where expr says, or, when the expression reads env(), replaced by
// envTaintedError.
func (c *Condition) evalError(err error) error {
	ce := runtimeError(c.src, err)
	if !c.readsEnv {
		return ce
	}
	return envTaintedError(c.src, failureKind(ce.Msg), err)
}

// notBoolError is the error of a condition that gave out instead of a boolean.
func (c *Condition) notBoolError(out any) error {
	if c.readsEnv {
		return envTaintedError(c.src, failNotBool, nil)
	}
	return &ConditionError{Source: c.src, Msg: fmt.Sprintf("gave %s, want true or false", describeValue(out))}
}
