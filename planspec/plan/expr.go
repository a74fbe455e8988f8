package plan

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"
	"github.com/stepseq/stepseq/planspec"
)

// Limits on conditions. A condition is a line or two; these bounds keep a hostile
// one from costing more than a plan's worth of time and memory.
const (
	// MaxConditionLen caps the source of one condition, in bytes.
	MaxConditionLen = 4 << 10
	// MaxConditionRead caps what read() and json() load from one file.
	MaxConditionRead = 1 << 20
	// MaxGlobMatches caps the paths one glob() returns.
	MaxGlobMatches = 10_000

	maxConditionNodes     = 1_000   // expr.MaxNodes
	conditionMemoryBudget = 100_000 // vm.VM.MemoryBudget: elements built by ranges, arrays, maps, sorts
)

// ErrConditionRead is matched by the evaluation error of a read(), json() or glob()
// whose file is too large, not JSON, or whose matches are too many.
var ErrConditionRead = errors.New("planspec: condition cannot read file")

// ErrNoRoot is returned by Eval when a condition names paths and the Env has no Root.
var ErrNoRoot = errors.New("planspec: condition names paths but the env has no workspace root")

// Condition is a compiled when, skip or check expression. It is immutable and safe
// for concurrent use: compile once, evaluate many times.
type Condition struct {
	src string

	once    sync.Once
	tree    *parser.Tree // checked, until the bytecode is generated from it
	prog    *vm.Program
	progErr error

	paths []string // literal path arguments, in order of appearance
	globs []string // literal glob patterns
	// builtPaths: a file function is given a path built at run time
	// (exists(vars.out)), so paths and globs are not all it may read.
	builtPaths bool
	steps      []string // step ids named as steps.ID or steps["ID"]
	vars       []string // var names named as vars.NAME or vars["NAME"]
	params     []string // param names named as params.NAME or params["NAME"]
	totals     []string // running totals named as totals.NAME or totals["NAME"]
	value      bool     // a template's expression: any value, not a boolean

	usesFS     bool // calls a function that reads the workspace
	usesSteps  bool
	usesStep   bool
	usesRounds bool
	usesRun    bool // reads round, now or totals: known only while the run goes
	// readsEnv: the expression names env or $env, so its evaluation errors
	// show nothing it evaluated (envTaintedError). envNames are the names
	// given to env() as literals; envBuilt: it may read others, named at run
	// time (env(vars.k)) or through $env.
	readsEnv bool
	envNames []string
	envBuilt bool
	usesItem bool // reads item or index: a foreach instance's
	// stepsNamed: every use of steps is steps.ID (or steps["ID"]) with a
	// literal id, so an evaluation needs only those steps' records.
	stepsNamed bool
}

// Env is what a condition sees when it is evaluated. Zero fields are safe: a zero
// Now is the wall clock, a nil Getenv is os.Getenv, missing runs read as PENDING.
type Env struct {
	// Root is the workspace. Every path argument is resolved inside it.
	Root *os.Root
	// Now is the time of the evaluation: now() and the reference of age().
	Now time.Time
	// TryStarted is when the current try of the step started: fresh(p) is true
	// when p was modified at or after it. Zero makes every existing file fresh.
	TryStarted time.Time
	// Runs are the run records by step id, for steps and step.
	Runs map[string]*planspec.StepRun
	// Step is the id of the step the condition belongs to, for step.
	Step string
	// Vars are the plan's vars.
	Vars map[string]any
	// Params are the run's params.
	Params map[string]any
	// Loop is the loop the step is in, or the latest one before it (State.LoopAround):
	// round and rounds read it. Nil: round 0, no rounds.
	Loop *planspec.Loop
	// Totals are the running totals of every loop (State.Totals): totals.NAME.
	Totals map[string]any
	// Getenv reads the environment for env(name).
	Getenv func(string) string
	// Item and Index are a foreach instance's element of the list and its
	// place in it.
	Item  any
	Index int
}

// ConditionError is a condition that does not compile or whose evaluation failed,
// with where in the source the problem is.
type ConditionError struct {
	Source string
	Line   int // 1-based line in Source; 0 when the problem is with the whole source
	Column int // 1-based column (in characters) in that line
	Msg    string
	Err    error // what the evaluation hit, when it was not a type or syntax problem
}

func (e *ConditionError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("condition %q: %s", planspec.Clip(e.Source, 80), e.Msg)
	}
	return fmt.Sprintf("condition %q: %s (at %d:%d)", planspec.Clip(e.Source, 80), e.Msg, e.Line, e.Column)
}

func (e *ConditionError) Unwrap() error { return e.Err }

// CompileCondition parses, type-checks and compiles a condition. It must give a
// boolean, use only the names of the condition language, and name only paths
// inside the workspace. Sources already compiled are not compiled again.
func CompileCondition(src string) (*Condition, error) {
	c, err := checkCondition(src)
	if err != nil {
		return nil, err
	}
	if _, err := c.program(); err != nil {
		return nil, err
	}
	return c, nil
}

// checkCondition is CompileCondition without the bytecode: all that validating a
// plan needs. The bytecode is generated once, by the first program call.
func checkCondition(src string) (*Condition, error) {
	if c := compiledCache.get(src); c != nil {
		return c, nil
	}
	c, err := parseCondition(src)
	if err != nil {
		return nil, err
	}
	compiledCache.put(src, c)
	return c, nil
}

// namesAny reports whether the expression names a step, var, param or total,
// which the plan's decoder checks once every name is known.
func (c *Condition) namesAny() bool {
	return len(c.steps)+len(c.vars)+len(c.params)+len(c.totals) > 0
}

// Source returns the expression as written.
func (c *Condition) Source() string { return c.src }

// Paths returns the literal path arguments and glob patterns the expression names,
// for the file watcher. Paths built at run time (exists(vars.out)) are not known.
func (c *Condition) Paths() (paths, globs []string) {
	return slices.Clone(c.paths), slices.Clone(c.globs)
}

// EnvNames returns the names the condition reads with env("NAME"), and
// whether they are all it may read: false when a name is built at run time
// (env(vars.k)) or the environment is reached through $env.
func (c *Condition) EnvNames() (names []string, known bool) {
	return slices.Clone(c.envNames), !c.envBuilt
}

// UnexposedEnv says why condition c may not run in a plan that arrived through
// a face, whose env() reads only the names in exposed: the names it reads
// that are not, or that it builds a name at run time; "" when it may run.
func UnexposedEnv(c *Condition, exposed []string) string {
	names, known := c.EnvNames()
	if !known {
		return "env() with a name built at run time, or $env, is not allowed in a plan that arrives through MCP " +
			"(plan_submit, run_start): name the variable, env(\"NAME\"), for the operator to expose with --expose-env NAME on watch or mcp"
	}
	var hidden, flags []string
	for _, n := range names {
		if !slices.Contains(exposed, n) {
			hidden = append(hidden, fmt.Sprintf("env(%q)", n))
			flags = append(flags, "--expose-env "+n)
		}
	}
	if len(hidden) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: a plan that arrives through MCP (plan_submit, run_start) reads only the environment the operator exposes (%s on watch or mcp); "+
		"or pass the value as a param", strings.Join(hidden, ", "), strings.Join(flags, " "))
}

// PathsKnown reports whether Paths names every file the condition may read:
// false when a file function is given a path built at run time.
func (c *Condition) PathsKnown() bool { return !c.builtPaths }

// Eval evaluates the condition against env. Files outside the workspace, escaping
// symlinks and unreadable files read as missing; only read(), json() and glob()
// over their limits and non-JSON content for json() are errors.
func (c *Condition) Eval(env *Env) (bool, error) {
	if env == nil {
		env = &Env{}
	}
	if c.usesFS && env.Root == nil {
		return false, &ConditionError{Source: c.src, Msg: ErrNoRoot.Error(), Err: ErrNoRoot}
	}
	prog, err := c.program()
	if err != nil {
		return false, err
	}
	ev := getEvaluation(c, env)
	defer putEvaluation(ev)
	out, err := ev.vm.Run(prog, ev)
	if err != nil {
		return false, c.evalError(err)
	}
	b, ok := out.(bool)
	if !ok {
		return false, c.notBoolError(out)
	}
	return b, nil
}

// evalValue evaluates a template's expression.
func (c *Condition) evalValue(env *Env) (any, error) {
	if c.usesFS && env.Root == nil {
		return nil, &ConditionError{Source: c.src, Msg: ErrNoRoot.Error(), Err: ErrNoRoot}
	}
	prog, err := c.program()
	if err != nil {
		return nil, err
	}
	ev := getEvaluation(c, env)
	defer putEvaluation(ev)
	out, err := ev.vm.Run(prog, ev)
	if err != nil {
		return nil, c.evalError(err)
	}
	return out, nil
}

func runtimeError(src string, err error) *ConditionError {
	var fe *file.Error
	if !errors.As(err, &fe) {
		return &ConditionError{Source: src, Msg: err.Error(), Err: err}
	}
	ce := &ConditionError{Source: src, Msg: fe.Message, Err: fe.Unwrap()}
	if fe.Snippet != "" {
		ce.Line, ce.Column = fe.Line, fe.Column+1
	}
	return ce
}

func describeValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "nil"
	case string:
		return "the string " + planspec.Clip(fmt.Sprintf("%q", v), 40)
	default:
		return planspec.Clip(fmt.Sprintf("%T %v", v, v), 60)
	}
}
