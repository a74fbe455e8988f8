package plan

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/stepseq/stepseq/planspec"
	"gopkg.in/yaml.v3"
)

// This file reads YAML as nodes, never into Go values directly: every value keeps
// its position for messages, and aliases are refused instead of expanded, which
// is what makes an alias bomb harmless.

// maxVarsDepth bounds how deep vars may nest; conditions read a level or two.
const maxVarsDepth = 32

// readDocument parses the single YAML document in data. A nil node means the file
// holds no document.
func readDocument(data []byte) (doc *yaml.Node, err error) {
	defer func() {
		// yaml.v3 is fuzzed, but a plan is untrusted input: whatever it hits
		// must be a rejected plan, not a crash of the sidecar.
		if r := recover(); r != nil {
			doc, err = nil, fmt.Errorf("yaml: cannot parse: %v", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var n yaml.Node
	if err := dec.Decode(&n); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, err
	case len(extra.Content) > 0 && extra.Content[0].ShortTag() != "!!null":
		return nil, &yamlPosError{line: extra.Content[0].Line, col: extra.Content[0].Column,
			msg: "a second YAML document: a plan file holds one plan; remove the \"---\" or split the file"}
	}
	if len(n.Content) == 0 {
		return nil, nil
	}
	return &n, nil
}

type yamlPosError struct {
	line, col int
	msg       string
}

func (e *yamlPosError) Error() string { return e.msg }

// yamlLineErr is compiled on first use, not at init.
var yamlLineErr = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^yaml: line (\d+): (.*)$`) })

// yamlErrorPos splits yaml.v3's "yaml: line 3: message" into a position and a
// message.
func yamlErrorPos(err error) (line, col int, msg string) {
	var pe *yamlPosError
	if errors.As(err, &pe) {
		return pe.line, pe.col, pe.msg
	}
	msg = err.Error()
	if m := yamlLineErr().FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		return max(line, 1), 1, "invalid YAML: " + m[2]
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	return 1, 1, "invalid YAML: " + msg
}

// binaryAt finds the first byte that cannot be in a YAML text file: a control
// character other than tab, newline and carriage return, or invalid UTF-8. It
// returns -1 for text.
func binaryAt(data []byte) (int, string) {
	for i := 0; i < len(data); {
		c := data[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f {
				return i, fmt.Sprintf("control character 0x%02x", c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size == 1 {
			return i, "invalid UTF-8"
		}
		i += size
	}
	return -1, ""
}

// describeNode names what a node holds, for "want X, got Y".
func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	}
	switch n.ShortTag() {
	case "!!str":
		return "the string " + strconv.Quote(planspec.Clip(n.Value, 40))
	case "!!null":
		return "nothing (null)"
	case "!!bool":
		return "the boolean " + n.Value
	case "!!int", "!!float":
		return "the number " + planspec.Clip(n.Value, 40)
	case "!!timestamp":
		return "the date " + planspec.Clip(n.Value, 40)
	}
	return fmt.Sprintf("a %s value", n.ShortTag())
}

func isNullNode(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// scalarHint tells how to make a scalar a string when YAML read it as another type.
func scalarHint(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && n.ShortTag() != "!!null" {
		return fmt.Sprintf(" (quote it: %q)", planspec.Clip(n.Value, 40))
	}
	return ""
}

// value turns a vars node into plain data: strings, numbers, booleans, nil, lists
// and string-keyed maps, which is what both expr and state.json can hold.
func (d *planDecoder) value(n *yaml.Node, field string, depth int) (any, bool) {
	if depth > maxVarsDepth {
		d.fail(n, field, "%s: vars nest deeper than %d levels: flatten them", planspec.Clip(field, 40), maxVarsDepth)
		return nil, false
	}
	switch n.Kind {
	case yaml.AliasNode:
		d.alias(n, field)
		return nil, false
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		ok := true
		for i, it := range n.Content {
			v, good := d.value(it, fmt.Sprintf("%s[%d]", field, i), depth+1)
			ok = ok && good
			out = append(out, v)
		}
		return out, ok
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		ok := true
		d.pairs(n, field, func(key string, k, v *yaml.Node) {
			val, good := d.value(v, field+"."+key, depth+1)
			ok = ok && good
			out[key] = val
		})
		return out, ok
	}
	switch n.ShortTag() {
	case "!!str", "!!timestamp":
		return n.Value, true
	case "!!null":
		return nil, true
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err == nil {
			return b, true
		}
	case "!!int":
		var i int
		if err := n.Decode(&i); err == nil {
			return i, true
		}
		d.fail(n, field, "%s: integer %s is out of range", planspec.Clip(field, 40), planspec.Clip(n.Value, 40))
		return nil, false
	case "!!float":
		var f float64
		if err := n.Decode(&f); err == nil {
			if math.IsNaN(f) || math.IsInf(f, 0) {
				d.fail(n, field, "%s: NaN and infinity cannot be written to state.json; use a number or a string", planspec.Clip(field, 40))
				return nil, false
			}
			return f, true
		}
	}
	d.fail(n, field, "%s: want a string, number, boolean, list or mapping, got %s", planspec.Clip(field, 40), describeNode(n))
	return nil, false
}
