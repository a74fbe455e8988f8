package planspec

import "bytes"

// spans are where a document's objects and lists end, by their opening bracket:
// the length of each. Splitting an object member by member then takes the end of
// a nested object or list from here rather than walking it again, as the levels
// of a state (the file, plan, plan.steps, a step) would each do.
type spans map[*byte]int

// minSpan is the shortest object or list spans records: a shorter one is walked
// again as fast as it is looked up.
const minSpan = 64

// maxJSONDepth is encoding/json's limit on nesting, beyond which json.Valid
// rejects a document.
const maxJSONDepth = 10000

// indexJSON checks that data is one JSON value, accepting what json.Valid
// accepts, and records the spans of its objects and lists on the way: a single
// pass where json.Valid and then the scans of each level were several.
func indexJSON(data []byte) (spans, bool) {
	x := &indexer{data: data, spans: spans{}}
	end := x.value(skipSpace(data, 0))
	return x.spans, end >= 0 && skipSpace(data, end) == len(data)
}

type indexer struct {
	data  []byte
	spans spans
	depth int
}

// value checks the value at data[i] and returns the index just past it; -1 when
// there is none.
func (x *indexer) value(i int) int {
	d := x.data
	if i >= len(d) {
		return -1
	}
	switch c := d[i]; {
	case c == '{':
		return x.container(i, '}')
	case c == '[':
		return x.container(i, ']')
	case c == '"':
		return x.str(i)
	case c == 't':
		return literal(d, i, "true")
	case c == 'f':
		return literal(d, i, "false")
	case c == 'n':
		return literal(d, i, "null")
	case c == '-' || '0' <= c && c <= '9':
		return number(d, i)
	}
	return -1
}

// container checks the object or list whose opening bracket is at data[open].
func (x *indexer) container(open int, close byte) int {
	if x.depth++; x.depth > maxJSONDepth {
		return -1
	}
	d := x.data
	i := skipSpace(d, open+1)
	if i < len(d) && d[i] == close {
		i++
	} else {
		for {
			if close == '}' {
				if i >= len(d) || d[i] != '"' {
					return -1
				}
				if i = x.str(i); i < 0 {
					return -1
				}
				if i = skipSpace(d, i); i >= len(d) || d[i] != ':' {
					return -1
				}
				i = skipSpace(d, i+1)
			}
			if i = x.value(i); i < 0 {
				return -1
			}
			if i = skipSpace(d, i); i >= len(d) {
				return -1
			}
			if d[i] == close {
				i++
				break
			}
			if d[i] != ',' {
				return -1
			}
			i = skipSpace(d, i+1)
		}
	}
	x.depth--
	if i-open >= minSpan {
		x.spans[&d[open]] = i - open
	}
	return i
}

// str checks the string whose opening quote is at data[i]: no control
// characters, only JSON's escapes. Like json.Valid, it lets bytes that are not
// UTF-8 through.
func (x *indexer) str(i int) int {
	d := x.data
	for j := i + 1; j < len(d); j++ {
		switch c := d[j]; {
		case c == '"':
			return j + 1
		case c < 0x20:
			return -1
		case c == '\\':
			if j++; j >= len(d) {
				return -1
			}
			switch d[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(d) {
					return -1
				}
				for _, h := range d[j+1 : j+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return -1
					}
				}
				j += 4
			default:
				return -1
			}
		}
	}
	return -1
}

func literal(d []byte, i int, lit string) int {
	if !bytes.HasPrefix(d[i:], []byte(lit)) {
		return -1
	}
	return i + len(lit)
}

// number checks a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func number(d []byte, i int) int {
	if d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		i = digits(d, i+1)
	default:
		return -1
	}
	if i < len(d) && d[i] == '.' {
		if j := digits(d, i+1); j > i+1 {
			i = j
		} else {
			return -1
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if j := digits(d, i); j > i {
			i = j
		} else {
			return -1
		}
	}
	return i
}

func digits(d []byte, i int) int {
	for i < len(d) && '0' <= d[i] && d[i] <= '9' {
		i++
	}
	return i
}
