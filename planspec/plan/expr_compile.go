package plan

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/checker"
	"github.com/expr-lang/expr/compiler"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/optimizer"
	"github.com/expr-lang/expr/vm"
	"github.com/stepseq/stepseq/planspec"
)

// pathFuncs take a workspace path as their first argument.
var pathFuncs = map[string]bool{
	"exists": true, "size": true, "lines": true, "mtime": true, "age": true,
	"fresh": true, "read": true, "json": true,
}

// conditionNames are the names the condition language adds to expr's builtins,
// for "did you mean" hints.
var conditionNames = []string{
	"exists", "glob", "globCount", "size", "lines", "mtime", "age", "fresh", "read", "json",
	"env", "now", "steps", "step", "vars", "params", "round", "rounds", "totals", "result", "item", "index",
}

// newConditionConfig is expr.Compile's configuration for conditions: the typed
// environment, a boolean result and a node budget. A template's expressions
// (value) give any value.
func newConditionConfig(value bool) *conf.Config {
	cfg := conf.CreateNew()
	opts := []expr.Option{
		expr.Env(evaluation{}),
		expr.MaxNodes(maxConditionNodes),
		expr.Patch(lenOfGlob{}),
	}
	if !value {
		opts = append(opts, expr.AsBool())
	}
	for _, opt := range opts {
		opt(cfg)
	}
	return cfg
}

// configs are reused between compilations: building the typed environment costs
// more than compiling a short expression. A config is only read by a compilation,
// apart from its cache of types, so one compilation at a time uses it. A channel
// rather than a sync.Pool, which the garbage collector empties: validating a big
// plan collects garbage often, and each refill would cost a rebuild.
var configs, valueConfigs = make(chan *conf.Config, 16), make(chan *conf.Config, 4)

func getConfig(value bool) *conf.Config {
	pool := configs
	if value {
		pool = valueConfigs
	}
	select {
	case cfg := <-pool:
		return cfg
	default:
		return newConditionConfig(value)
	}
}

func putConfig(cfg *conf.Config, value bool) {
	pool := configs
	if value {
		pool = valueConfigs
	}
	select {
	case pool <- cfg:
	default:
	}
}

// lenOfGlob compiles len(glob(P)) as globCount(P): the same number, without
// building a list that the cap on glob() would turn into an error.
type lenOfGlob struct{}

func (lenOfGlob) Visit(node *ast.Node) {
	b, ok := (*node).(*ast.BuiltinNode)
	if !ok || b.Name != "len" || len(b.Arguments) != 1 {
		return
	}
	call, ok := b.Arguments[0].(*ast.CallNode)
	if !ok || len(call.Arguments) != 1 {
		return
	}
	if fn, ok := call.Callee.(*ast.IdentifierNode); !ok || fn.Value != "glob" {
		return
	}
	if arg, ok := call.Arguments[0].(*ast.StringNode); ok && planspec.CheckGlob(arg.Value) != nil {
		return // inspect reports it, under the name that was written
	}
	callee := &ast.IdentifierNode{Value: "globCount"}
	callee.SetLocation(call.Callee.Location())
	ast.Patch(node, &ast.CallNode{Callee: callee, Arguments: call.Arguments})
}

// parseCondition is the first half of expr.Compile: parse, type-check, fold
// constants. It also inspects the checked tree for path arguments and step
// references.
func parseCondition(src string) (c *Condition, err error) {
	return parseExpr(src, false)
}

// parseExpr parses a condition, or with value a template's expression, which may
// give any value.
func parseExpr(src string, value bool) (c *Condition, err error) {
	switch {
	case strings.TrimSpace(src) == "":
		return nil, &ConditionError{Source: src, Msg: `empty condition: want an expression that gives true or false, like exists("out.md")`}
	case len(src) > MaxConditionLen:
		return nil, &ConditionError{Source: src, Msg: fmt.Sprintf("longer than %d bytes: split the test across when, skip and check", MaxConditionLen)}
	case !utf8.ValidString(src):
		return nil, &ConditionError{Source: src, Msg: "not valid UTF-8"}
	}
	err = withConfig(src, value, func(cfg *conf.Config) error {
		tree, err := checker.ParseCheck(src, cfg)
		if err != nil {
			return compileError(src, err)
		}
		if err := optimizer.Optimize(&tree.Node, cfg); err != nil {
			var fe *file.Error
			if errors.As(err, &fe) {
				err = fe.Bind(tree.Source)
			}
			return compileError(src, err)
		}
		c = &Condition{src: src, tree: tree, value: value}
		return c.inspect(&tree.Node)
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// program is the second half of expr.Compile: bytecode from the checked tree,
// generated once.
func (c *Condition) program() (*vm.Program, error) {
	c.once.Do(func() {
		c.progErr = withConfig(c.src, c.value, func(cfg *conf.Config) error {
			prog, err := compiler.Compile(c.tree, cfg)
			if err != nil {
				return compileError(c.src, err)
			}
			c.prog = prog
			return nil
		})
		c.tree = nil
	})
	return c.prog, c.progErr
}

// withConfig runs fn with a pooled configuration. A condition is user input: a
// panic deep in expr must reject it, never take the sidecar down, and the config
// that saw the panic is dropped rather than reused.
func withConfig(src string, value bool, fn func(*conf.Config) error) (err error) {
	cfg := getConfig(value)
	defer func() {
		if r := recover(); r != nil {
			err = &ConditionError{Source: src, Msg: fmt.Sprintf("cannot compile: %v", r)}
			return
		}
		putConfig(cfg, value)
	}()
	return fn(cfg)
}

// inspect collects what the watcher and Eval need to know about the expression and
// rejects literal paths that leave the workspace.
func (c *Condition) inspect(root *ast.Node) error {
	v := &inspector{c: c}
	ast.Walk(root, v)
	if v.err != nil {
		return v.err
	}
	c.stepsNamed = v.stepsIdents == v.stepsNamed
	// A use of env other than a call with a literal name (env(vars.k), env
	// passed as a value) reads a name known only at run time.
	c.envBuilt = c.envBuilt || v.envIdents != v.envNamed
	return nil
}

type inspector struct {
	c   *Condition
	err *ConditionError
	// stepsIdents counts the uses of steps, stepsNamed those that are steps.ID.
	stepsIdents, stepsNamed int
	// envIdents counts the uses of env, envNamed those that are env("NAME").
	envIdents, envNamed int
}

// Visit notes what a node of the condition reads: names, steps.ID, vars and
// params, literal paths and globs.
func (v *inspector) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.IdentifierNode:
		v.identifier(n)
	case *ast.MemberNode:
		v.member(n)
	case *ast.CallNode:
		v.call(n)
	}
}

// identifier notes which of the condition's inputs a bare name reads (steps,
// step, rounds, the file functions) and refuses env where values are kept.
func (v *inspector) identifier(n *ast.IdentifierNode) {
	c := v.c
	switch {
	case c.value && (n.Value == "env" || n.Value == "$env"):
		v.refuse(n, n.Value+" is not allowed in a ${…} template, a summary or a max: what it gives is kept "+
			"in state.json in plain text; pass the value as a param (params.NAME), or let the agent read its environment")
	case n.Value == "steps":
		c.usesSteps = true
		v.stepsIdents++
	case n.Value == "step" || n.Value == "result":
		c.usesStep = true
	case n.Value == "rounds":
		c.usesRounds = true
	case n.Value == "item" || n.Value == "index":
		c.usesItem = true
	case n.Value == "round" || n.Value == "now" || n.Value == "totals":
		c.usesRun = true
	case n.Value == "$env":
		c.usesSteps, c.usesStep, c.usesFS, c.usesRounds = true, true, true, true
		c.builtPaths, c.readsEnv, c.envBuilt = true, true, true
	case n.Value == "env":
		c.readsEnv = true
		v.envIdents++
	case pathFuncs[n.Value] || n.Value == "glob" || n.Value == "globCount":
		c.usesFS = true
	}
}

// member notes the steps, vars, params and totals named as steps.ID,
// vars.NAME, params.NAME and totals.NAME.
func (v *inspector) member(n *ast.MemberNode) {
	c := v.c
	id, ok := n.Node.(*ast.IdentifierNode)
	prop, isStr := n.Property.(*ast.StringNode)
	switch {
	case !ok || !isStr:
	case id.Value == "steps":
		v.stepsNamed++
		if !slices.Contains(c.steps, prop.Value) {
			c.steps = append(c.steps, prop.Value)
		}
	case id.Value == "vars" && !slices.Contains(c.vars, prop.Value):
		c.vars = append(c.vars, prop.Value)
	case id.Value == "params" && !slices.Contains(c.params, prop.Value):
		c.params = append(c.params, prop.Value)
	case id.Value == "totals" && !slices.Contains(c.totals, prop.Value):
		c.totals = append(c.totals, prop.Value)
	}
}

// call checks and notes the literal path or glob a file function is given.
func (v *inspector) call(n *ast.CallNode) {
	c := v.c
	fn, ok := n.Callee.(*ast.IdentifierNode)
	if !ok || len(n.Arguments) == 0 {
		return
	}
	arg, ok := n.Arguments[0].(*ast.StringNode)
	if !ok {
		c.builtPaths = c.builtPaths || pathFuncs[fn.Value] || fn.Value == "glob" || fn.Value == "globCount"
		return
	}
	switch {
	case fn.Value == "env":
		v.envNamed++
		if !slices.Contains(c.envNames, arg.Value) {
			c.envNames = append(c.envNames, arg.Value)
		}
	case pathFuncs[fn.Value]:
		if err := planspec.CheckPath(arg.Value); err != nil {
			v.fail(arg, fn.Value, err)
		} else if !slices.Contains(c.paths, arg.Value) {
			c.paths = append(c.paths, arg.Value)
		}
	case fn.Value == "glob" || fn.Value == "globCount":
		if err := planspec.CheckGlob(arg.Value); err != nil {
			v.fail(arg, fn.Value, err)
		} else if !slices.Contains(c.globs, arg.Value) {
			c.globs = append(c.globs, arg.Value)
		}
	}
}

func (v *inspector) fail(at ast.Node, fn string, err error) {
	v.refuse(at, fn+": "+err.Error())
}

// refuse keeps the first error found, at the node's place.
func (v *inspector) refuse(at ast.Node, msg string) {
	if v.err != nil {
		return
	}
	line, col := position(v.c.src, at.Location().From)
	v.err = &ConditionError{Source: v.c.src, Line: line, Column: col, Msg: msg}
}

// position turns a character offset into a 1-based line and column.
func position(src string, offset int) (line, col int) {
	line, col = 1, 1
	i := 0
	for _, r := range src {
		if i == offset {
			break
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
		i++
	}
	return line, col
}

// compileError rewrites expr's messages where the condition language can say more.
func compileError(src string, err error) error {
	ce := &ConditionError{Source: src, Msg: err.Error()}
	var fe *file.Error
	if errors.As(err, &fe) {
		ce.Msg = fe.Message
		if fe.Snippet != "" || fe.Line > 0 {
			ce.Line, ce.Column = max(fe.Line, 1), fe.Column+1
		}
	}
	ce.Msg = typeNames.Replace(strings.TrimSpace(ce.Msg))
	switch msg := ce.Msg; {
	case strings.HasPrefix(msg, "expected bool, but got "):
		got := strings.TrimPrefix(msg, "expected bool, but got ")
		ce.Msg = fmt.Sprintf("gives %s, want true or false: compare it, like size(\"out.md\") > 0", got)
		ce.Line, ce.Column = 0, 0
	case strings.HasPrefix(msg, "unknown name "):
		name := strings.TrimPrefix(msg, "unknown name ")
		if s := planspec.Suggest(name, conditionNames); s != "" {
			ce.Msg = fmt.Sprintf("unknown name %q: did you mean %q?", name, s)
		} else {
			ce.Msg = fmt.Sprintf("unknown name %q: want one of %s, or an expr builtin", name, strings.Join(conditionNames, ", "))
		}
	}
	return ce
}

// typeNames hides the Go types behind the condition language from messages.
var typeNames = strings.NewReplacer(
	"type planspec.RunView has no field ", "a step record has only status, tries, lastRunIso, error, stdout, skipped, result, results and failed, not ",
	"planspec.RunView", "step record",
	"type planspec.evaluation has no field ", "unknown name ",
	"planspec.evaluation", "the condition language",
)

// compiledCache keeps the conditions of the plans in use: a plan is validated on
// every edit, and the same few conditions recur across steps. When it is full it
// starts over, which bounds it without bookkeeping.
var compiledCache = &conditionCache{m: map[string]*Condition{}}

const conditionCacheSize = 4096

type conditionCache struct {
	mu sync.Mutex
	m  map[string]*Condition
}

func (cc *conditionCache) get(src string) *Condition {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.m[src]
}

func (cc *conditionCache) put(src string, c *Condition) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if len(cc.m) >= conditionCacheSize {
		clear(cc.m)
	}
	cc.m[src] = c
}
