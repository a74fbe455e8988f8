package plan

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/stepseq/stepseq/planspec"
)

// Template is a text with ${EXPR} in it: an instruction, a title or
// an agent argument, compiled once when the plan is loaded and rendered when a
// try starts. $${ is a literal ${. Its expressions may not read env(): the text
// it renders is kept in the state. It is immutable and safe for concurrent use.
type Template struct {
	src   string
	parts []templatePart
}

// templatePart is a literal text, or an expression when expr is not nil.
type templatePart struct {
	lit  string
	expr *Condition
	off  int // the byte offset of the expression in the template
}

// CompileTemplate compiles a template. An error is a *ConditionError whose line
// and column are in the template's text.
func CompileTemplate(src string) (*Template, error) {
	t := &Template{src: src}
	var lit strings.Builder
	for i := 0; i < len(src); {
		switch {
		case strings.HasPrefix(src[i:], "$${"):
			lit.WriteString("${")
			i += 3
		case strings.HasPrefix(src[i:], "${"):
			end := exprEnd(src, i+2)
			if end < 0 {
				line, col := position(src, runeOffset(src, i))
				return nil, &ConditionError{Source: src, Line: line, Column: col,
					Msg: "${ is not closed: end the expression with }, or write $${ for a literal ${"}
			}
			inner := src[i+2 : end]
			if strings.TrimSpace(inner) == "" {
				line, col := position(src, runeOffset(src, i))
				return nil, &ConditionError{Source: src, Line: line, Column: col,
					Msg: "empty ${}: want an expression, like ${params.target}"}
			}
			c, err := compileTemplateExpr(inner)
			if err != nil {
				return nil, locateIn(src, i+2, err)
			}
			if lit.Len() > 0 {
				t.parts = append(t.parts, templatePart{lit: lit.String()})
				lit.Reset()
			}
			t.parts = append(t.parts, templatePart{expr: c, off: i + 2})
			i = end + 1
		default:
			lit.WriteByte(src[i])
			i++
		}
	}
	if lit.Len() > 0 {
		t.parts = append(t.parts, templatePart{lit: lit.String()})
	}
	return t, nil
}

// templateExprs caches a template's compiled expressions, as compiledCache does
// conditions.
var templateExprs = &conditionCache{m: map[string]*Condition{}}

func compileTemplateExpr(src string) (*Condition, error) {
	if c := templateExprs.get(src); c != nil {
		return c, nil
	}
	c, err := parseExpr(src, true)
	if err != nil {
		return nil, err
	}
	if _, err := c.program(); err != nil {
		return nil, err
	}
	templateExprs.put(src, c)
	return c, nil
}

// exprEnd is the byte offset of the } that closes the expression starting at
// from, past nested brackets and string literals; -1 when there is none.
func exprEnd(s string, from int) int {
	depth := 0
	for i := from; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\'', '`':
			for i++; i < len(s) && s[i] != c; i++ {
				if s[i] == '\\' && c != '`' {
					i++
				}
			}
			if i >= len(s) {
				return -1
			}
		case '{', '[', '(':
			depth++
		case ']', ')':
			depth--
		case '}':
			if depth == 0 {
				return i
			}
			depth--
		}
	}
	return -1
}

func runeOffset(s string, byteOff int) int {
	return len([]rune(s[:byteOff]))
}

// locateIn moves an expression's error, which starts at byte off of the
// template, to the template's line and column.
func locateIn(src string, off int, err error) error {
	ce, ok := err.(*ConditionError)
	if !ok {
		return err
	}
	line, col := position(src, runeOffset(src, off))
	out := &ConditionError{Source: src, Msg: ce.Msg, Err: ce.Err, Line: line, Column: col}
	switch {
	case ce.Line == 1:
		out.Column = col + ce.Column - 1
	case ce.Line > 1:
		out.Line, out.Column = line+ce.Line-1, ce.Column
	}
	return out
}

// Source returns the template as written.
func (t *Template) Source() string { return t.src }

// names are the steps, vars, params and totals the template's expressions
// name, as one Condition for the plan's decoder to check.
func (t *Template) names() *Condition {
	c := &Condition{src: t.src}
	for _, p := range t.parts {
		if p.expr != nil {
			c.steps = append(c.steps, p.expr.steps...)
			c.vars = append(c.vars, p.expr.vars...)
			c.params = append(c.params, p.expr.params...)
			c.totals = append(c.totals, p.expr.totals...)
		}
	}
	return c
}

// Render evaluates the template's expressions against env. A string is written
// as it is, a map or a list as JSON; an expression that fails, or gives nil (a
// missing result or key), is an error that names it.
func (t *Template) Render(env *Env) (string, error) {
	if env == nil {
		env = &Env{}
	}
	var b strings.Builder
	for _, p := range t.parts {
		if p.expr == nil {
			b.WriteString(p.lit)
			continue
		}
		v, err := p.expr.evalValue(env)
		if ce, ok := err.(*ConditionError); ok {
			return "", &TemplateError{Expr: p.expr.src, Err: ce, msg: ce.Msg}
		}
		if err != nil {
			return "", fmt.Errorf("template ${%s}: %w", planspec.Clip(p.expr.src, 80), err)
		}
		if err := writeValue(&b, v); err != nil {
			return "", fmt.Errorf("template ${%s}: %w", planspec.Clip(p.expr.src, 80), err)
		}
	}
	return b.String(), nil
}

// TemplateError is an expression of a template that failed to evaluate.
type TemplateError struct {
	Expr string
	Err  error
	msg  string
}

func (e *TemplateError) Error() string {
	return fmt.Sprintf("template ${%s}: %s", planspec.Clip(e.Expr, 80), e.msg)
}

func (e *TemplateError) Unwrap() error { return e.Err }

func writeValue(b *strings.Builder, v any) error {
	switch v := v.(type) {
	case nil:
		return fmt.Errorf("gave nil: a result, key or param that is not there")
	case string:
		b.WriteString(v)
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case int:
		b.WriteString(strconv.Itoa(v))
	case float64:
		b.WriteString(strconv.FormatFloat(v, 'f', -1, 64))
	case time.Time:
		b.WriteString(v.UTC().Format(time.RFC3339))
	case time.Duration:
		b.WriteString(v.String())
	case fmt.Stringer:
		b.WriteString(v.String())
	default:
		out, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("cannot be written as JSON: %v", err)
		}
		b.Write(out)
	}
	return nil
}

// RenderStep renders a step's title and instruction from their templates, the
// ones without a template as they are. An error names the key.
func RenderStep(spec *planspec.StepSpec, env *Env) (title, instruction string, err error) {
	if spec == nil {
		return "", "", fmt.Errorf("no such step")
	}
	title, instruction = spec.Title, spec.Instruction
	for _, t := range []struct {
		src, key string
		out      *string
	}{{spec.TitleTemplate, "title", &title}, {spec.InstructionTemplate, "instruction", &instruction}} {
		if t.src == "" {
			continue
		}
		tpl, err := CompileTemplate(t.src)
		if err == nil {
			*t.out, err = tpl.Render(env)
		}
		if err != nil {
			return "", "", fmt.Errorf("%s: %w", t.key, err)
		}
	}
	return title, instruction, nil
}

// paramsOnly reports whether the template reads nothing but params and vars,
// which are known when a run starts.
func (t *Template) paramsOnly() bool {
	for _, p := range t.parts {
		if c := p.expr; c != nil && (c.usesFS || c.usesSteps || c.usesStep || c.usesRounds || c.usesRun || c.builtPaths) {
			return false
		}
	}
	return true
}

// RenderAtStart renders, in a run's new state, every title and instruction
// whose template reads only params and vars, so that the state holds plain
// text the original runner could send from the start; the templates stay for
// the tries to render again. One that fails to render is left to its try,
// which fails with the reason.
func RenderAtStart(st *planspec.State) {
	env := &Env{Params: st.Settings.Params, Vars: st.Settings.Vars}
	for _, spec := range st.Steps {
		for _, t := range []struct {
			src string
			out *string
		}{{spec.TitleTemplate, &spec.Title}, {spec.InstructionTemplate, &spec.Instruction}} {
			if t.src == "" {
				continue
			}
			tpl, err := CompileTemplate(t.src)
			if err != nil || !tpl.paramsOnly() {
				continue
			}
			if text, err := tpl.Render(env); err == nil {
				*t.out = text
			}
		}
	}
}
