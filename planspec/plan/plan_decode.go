package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/expr-lang/expr/types"
	"github.com/stepseq/stepseq/planspec"
	"gopkg.in/yaml.v3"
)

// The keys of a plan and of a step, in the order the docs list them.
var (
	planKeys = []string{"name", "agent", "fallback", "stepDelay", "maxRetries", "timeout", "vars", "params", "summary",
		"reports", "launchTimeout", "milestoneTimeout", "idleTimeout", "heartbeat", "limitWait", "resume", "sandbox", "notify", "approval",
		"budget", "prices", "maxParallel", "worktree", "merge", "steps"}
	stepKeys = []string{"id", "title", "instruction", "requiredOutputs", "when", "skip", "check",
		"on", "timeout", "retries", "awaitOutputs", "agent", "fallback",
		"reports", "launchTimeout", "milestoneTimeout", "idleTimeout", "result", "onInvalid", "resultFrom", "limitWait", "resume", "sandbox",
		"exit", "abort", "approve", "budget", "needs", "foreach", "continueOnFailure", "worktree", "merge"}
	// groupKeys are the keys of a repeat group.
	groupKeys = []string{"id", "title", "repeat", "totals", "needs", "steps"}
)

// planDecoder walks a plan's YAML nodes, collecting a located error for every
// problem and carrying on, so that one run reports them all.
type planDecoder struct {
	file  string
	errs  []*PlanError
	conds []pendingCondition // compiled once the walk is over
	refs  []stepRef          // conditions naming steps.ID, checked once every id is known
	// results are the steps' result schemas by the step's field (steps[2]),
	// which exit and abort are type-checked against.
	results map[string]json.RawMessage
	// totalDecls are the totals the plan's groups declare, totalTypes what
	// totals.NAME gives, by name.
	totalDecls map[string]totalDecl
	totalTypes types.Map

	aliases map[string]*aliasUse // by anchor name

	gk graphKeys
}

type pendingCondition struct {
	node  *yaml.Node
	field string
	src   string
}

// stepRef is a condition that names other steps.
type stepRef struct {
	node  *yaml.Node
	field string
	key   string
	cond  *Condition
	tpl   *Template // the template the names are read from; nil for an expression
}

func (d *planDecoder) fail(n *yaml.Node, field, format string, args ...any) {
	line, col := 1, 1
	if n != nil && n.Line > 0 {
		line, col = n.Line, n.Column
	}
	d.failAt(line, col, field, fmt.Sprintf(format, args...))
}

func (d *planDecoder) failAt(line, col int, field, msg string) {
	d.errs = append(d.errs, &PlanError{File: d.file, Line: line, Col: col, Field: field, Msg: msg})
}

// alias refuses an alias. The first use of each anchor is reported, with a count
// of the others: a YAML bomb is hundreds of uses of a few anchors.
func (d *planDecoder) alias(n *yaml.Node, field string) {
	if use, ok := d.aliases[n.Value]; ok {
		use.more++
		return
	}
	if d.aliases == nil {
		d.aliases = map[string]*aliasUse{}
	}
	d.fail(n, field, "alias *%s: aliases are not supported in plans; write the value out", planspec.Clip(n.Value, 40))
	d.aliases[n.Value] = &aliasUse{err: d.errs[len(d.errs)-1]}
}

type aliasUse struct {
	err  *PlanError
	more int
}

func (d *planDecoder) countAliases() {
	for name, use := range d.aliases {
		if use.more > 0 {
			use.err.Msg += fmt.Sprintf(" (and %d more uses of *%s)", use.more, planspec.Clip(name, 40))
		}
	}
}

func (d *planDecoder) decode(data []byte) *Plan {
	if len(data) > MaxPlanSize {
		d.fail(nil, "", "larger than %d MiB: a plan is a few kilobytes; keep long instructions in files the steps read", MaxPlanSize>>20)
		return nil
	}
	if off, what := binaryAt(data); off >= 0 {
		line, col := planspec.LineCol(data, off)
		d.failAt(line, col, "", what+": a plan is YAML text, this looks like binary data")
		return nil
	}
	doc, err := readDocument(data)
	if err != nil {
		line, col, msg := yamlErrorPos(err)
		if i := bytes.IndexByte(data, '\t'); i >= 0 && strings.Contains(msg, "cannot start any token") {
			// YAML refuses tabs for indentation, and says so in words that do not name them.
			tl, tc := planspec.LineCol(data, i)
			line, col, msg = tl, tc, msg+": a tab; indent YAML with spaces"
		} else if at := unclosedFlow(data); at >= 0 && strings.Contains(msg, "did not find expected") {
			// yaml.v3 locates an unclosed [ or { at the document's start.
			line, col = planspec.LineCol(data, at)
			msg += fmt.Sprintf(": the %q here is never closed", data[at])
		} else if at := unclosedQuote(data, msg); at >= 0 {
			// yaml.v3 names no column, and for a quote on the first line the last line.
			line, col = planspec.LineCol(data, at)
			msg = fmt.Sprintf("invalid YAML: a quoted value opens here and is never closed: close the quote (%c) where the value ends", data[at])
		}
		d.failAt(line, col, "", msg)
		return nil
	}
	if doc == nil || isNullNode(doc.Content[0]) {
		d.fail(nil, "", "empty plan: want a mapping with steps, each with id, title and instruction")
		return nil
	}
	p := d.plan(doc.Content[0])
	d.countAliases()
	return p
}

// pairs calls fn for each key of a mapping, after refusing keys that are not plain
// strings and keys given twice.
func (d *planDecoder) pairs(n *yaml.Node, field string, fn func(key string, k, v *yaml.Node)) {
	var seen map[string]int // key → line; a step has few keys, so only big mappings need it
	firstLine := func(key string, upTo int) (int, bool) {
		if seen != nil {
			line, ok := seen[key]
			return line, ok
		}
		for j := 0; j < upTo; j += 2 {
			if k := n.Content[j]; k.Kind == yaml.ScalarNode && k.Value == key {
				return k.Line, true
			}
		}
		return 0, false
	}
	if len(n.Content) > 32 {
		seen = make(map[string]int, len(n.Content)/2)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case k.Kind == yaml.AliasNode:
			d.alias(k, field)
			continue
		case k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge":
			d.fail(k, field, "merge key <<: not supported in plans; write the keys out")
			continue
		case k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str":
			d.fail(k, field, "%s: want a string key, got %s%s", planspec.Clip(orTop(field), 40), describeNode(k), scalarHint(k))
			continue
		}
		if line, dup := firstLine(k.Value, i); dup {
			d.fail(k, join(field, k.Value), "duplicate key %q: the first is at line %d; give each key once", planspec.Clip(k.Value, 40), line)
			continue
		}
		if seen != nil {
			seen[k.Value] = k.Line
		}
		fn(k.Value, k, v)
	}
}

// fields calls fn for each key of a mapping as pairs does, with the key's field
// (field.key), after refusing a value that is an alias.
func (d *planDecoder) fields(n *yaml.Node, field string, fn func(key, f string, k, v *yaml.Node)) {
	d.pairs(n, field, func(key string, k, v *yaml.Node) {
		f := join(field, key)
		if v.Kind == yaml.AliasNode {
			d.alias(v, f)
			return
		}
		fn(key, f, k, v)
	})
}

// hasKey reports whether mapping n has key, whatever its value.
func hasKey(n *yaml.Node, key string) bool {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.Value == key {
			return true
		}
	}
	return false
}

func orTop(field string) string {
	if field == "" {
		return "plan"
	}
	return field
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

func (d *planDecoder) unknownKey(k *yaml.Node, field string, known, other []string, otherName, otherPlace string) {
	key := k.Value
	switch {
	case slices.Contains(other, key):
		d.fail(k, join(field, key), "key %q does not belong here: it is a %s key, %s", key, otherName, otherPlace)
	case planspec.Suggest(key, known) != "":
		d.fail(k, join(field, key), "unknown key %q: did you mean %q?", planspec.Clip(key, 40), planspec.Suggest(key, known))
	case planspec.Suggest(key, other) != "":
		d.fail(k, join(field, key), "unknown key %q: did you mean %q? It is a %s key, %s", planspec.Clip(key, 40), planspec.Suggest(key, other), otherName, otherPlace)
	default:
		d.fail(k, join(field, key), "unknown key %q: want one of %s", planspec.Clip(key, 40), strings.Join(known, ", "))
	}
}

// str reads a string. YAML reads yes, 12 and 2024-01-01 as other types; the
// message says to quote them.
func (d *planDecoder) str(n *yaml.Node, field string) (string, bool) {
	switch {
	case n.Kind == yaml.AliasNode:
		d.alias(n, field)
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str":
		return n.Value, true
	default:
		d.fail(n, field, "%s: want a string, got %s%s", lastKey(field), describeNode(n), scalarHint(n))
	}
	return "", false
}

// strList reads a list of strings, checking each with check when it is not nil.
func (d *planDecoder) strList(n *yaml.Node, field string, check func(string) error) ([]string, bool) {
	if n.Kind == yaml.AliasNode {
		d.alias(n, field)
		return nil, false
	}
	if n.Kind != yaml.SequenceNode {
		hint := ""
		if n.Kind == yaml.ScalarNode && !isNullNode(n) {
			hint = fmt.Sprintf(", like [%s]", planspec.Clip(n.Value, 40))
		}
		d.fail(n, field, "%s: want a list of strings%s, got %s", lastKey(field), hint, describeNode(n))
		return nil, false
	}
	out := make([]string, 0, len(n.Content))
	ok := true
	for i, it := range n.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		s, good := d.str(it, f)
		if good && check != nil {
			if err := check(s); err != nil {
				d.fail(it, f, "%s: %v", lastKey(field), err)
				good = false
			}
		}
		ok = ok && good
		out = append(out, s)
	}
	return out, ok
}

// duration reads a span written as a string: "90s", "2m", "1h30m".
func (d *planDecoder) duration(n *yaml.Node, field string) planspec.Duration {
	switch {
	case n.Kind == yaml.AliasNode:
		d.alias(n, field)
		return 0
	case n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str":
		hint := ""
		if n.Kind == yaml.ScalarNode && (n.ShortTag() == "!!int" || n.ShortTag() == "!!float") {
			hint = fmt.Sprintf(" (with a unit: %ss or %sm)", n.Value, n.Value)
		}
		d.fail(n, field, "%s: want a duration like 90s, 2m or 1h, got %s%s", lastKey(field), describeNode(n), hint)
		return 0
	}
	v, err := planspec.ParseDuration(n.Value)
	if err != nil {
		d.fail(n, field, "%s: %v", lastKey(field), err)
	}
	return v
}

// count reads a whole number ≥ 0.
func (d *planDecoder) count(n *yaml.Node, field string) *int {
	var v int
	switch {
	case n.Kind == yaml.AliasNode:
		d.alias(n, field)
		return nil
	case n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil:
		d.fail(n, field, "%s: want a whole number ≥ 0, like 3, got %s", lastKey(field), describeNode(n))
		return nil
	case v < 0 || v > 1_000_000:
		d.fail(n, field, "%s: want a whole number from 0 to 1000000, got %d", lastKey(field), v)
		return nil
	}
	return &v
}

// boolean reads true or false.
func (d *planDecoder) boolean(n *yaml.Node, field string) (bool, bool) {
	var v bool
	switch {
	case n.Kind == yaml.AliasNode:
		d.alias(n, field)
		return false, false
	case n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&v) != nil:
		d.fail(n, field, "%s: want true or false, got %s", lastKey(field), describeNode(n))
		return false, false
	}
	return v, true
}

// words reads an agent argv: a non-empty list of non-empty strings.
func (d *planDecoder) words(n *yaml.Node, field string) []string {
	argv, ok := d.strList(n, field, func(s string) error {
		if strings.TrimSpace(s) == "" {
			return fmt.Errorf("empty word: every element is one argument, like [openclaw, agent, --message]")
		}
		return nil
	})
	if ok && len(argv) == 0 && n.Kind == yaml.SequenceNode {
		d.fail(n, field, "%s: empty list: want the command and its arguments, like [openclaw, agent, --message]", lastKey(field))
	}
	return argv
}

func lastKey(field string) string {
	if i := strings.LastIndexByte(field, '.'); i >= 0 {
		field = field[i+1:]
	}
	if i := strings.IndexByte(field, '['); i >= 0 {
		field = field[:i]
	}
	return field
}

// notify reads the plan's sinks: a list of {command: [argv]} or {webhook: URL}.
func (d *planDecoder) notify(n *yaml.Node, field string) []planspec.NotifySink {
	if n.Kind != yaml.SequenceNode {
		d.fail(n, field, "notify: want a list of sinks, like [{command: [notify-send, stepseq]}, {webhook: https://ntfy.sh/topic}], got %s", describeNode(n))
		return nil
	}
	var out []planspec.NotifySink
	for i, it := range n.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		if it.Kind != yaml.MappingNode {
			d.fail(it, f, "want a sink {command: [argv]} or {webhook: URL}, got %s", describeNode(it))
			continue
		}
		var sink planspec.NotifySink
		d.pairs(it, f, func(key string, k, v *yaml.Node) {
			switch key {
			case "command":
				sink.Command = d.words(v, f+".command")
			case "webhook":
				sink.Webhook, _ = d.str(v, f+".webhook")
			default:
				d.fail(k, f+"."+key, "unknown key %q: a sink has command or webhook", planspec.Clip(key, 40))
			}
		})
		if err := sink.Check(); err != nil {
			d.fail(it, f, "%v", err)
			continue
		}
		out = append(out, sink)
	}
	return out
}

// unclosedFlow is the offset of the outermost [ or { that no ] or } closes,
// skipping quoted text and comments; -1 when every one is closed. It counts
// rather than keeps a stack: a hostile plan may nest a million deep.
func unclosedFlow(data []byte) int {
	depth, outer := 0, -1
	var quote byte
	comment := false
	for i, c := range data {
		switch {
		case comment:
			comment = c != '\n'
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case (c == '"' || c == '\'') && (i == 0 || strings.IndexByte(" \t\n:[{,-", data[i-1]) >= 0):
			quote = c // a quoted scalar; an apostrophe inside a word is text
		case c == '#' && (i == 0 || data[i-1] == ' ' || data[i-1] == '\n'):
			comment = true
		case c == '[' || c == '{':
			if depth == 0 {
				outer = i
			}
			depth++
		case (c == ']' || c == '}') && depth > 0:
			depth--
		}
	}
	if depth == 0 {
		return -1
	}
	return outer
}
