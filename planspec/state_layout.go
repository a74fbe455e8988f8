package planspec

import (
	"bytes"
	"math"
)

// The layout of state.json. A state is written as the original writes it, with
// two-space indentation, until its plan is large: from linesFrom steps on, each
// step of plan.steps and each run of stepRuns is written on one line of its own,
// compact inside, with the indentation around them as before. The original's
// scripts and every JSON reader take any whitespace; a person reads a small file,
// and greps or tails a large one line by line. At 50,000 steps the records' own
// indentation is about a quarter of the file, and every write of the state pays
// for its bytes twice, once into the page cache and once to the disk.

// linesFrom is the number of steps from which a state is written one record a
// line. Tests lower it.
var linesFrom = 1000

// oneLine reports whether s is written one record a line.
func (s *State) oneLine() bool { return len(s.Steps) >= linesFrom }

// appendIndented appends raw, valid JSON, indented with two spaces as a value at
// the given depth of the document, as json.Indent writes it with that prefix,
// but for the objects and lists nested flat levels or more inside raw (raw
// itself is level 0), which are written compact, each on the line it starts on.
func appendIndented(dst, raw []byte, depth, flat int) []byte {
	in := indenter{raw: raw, depth: depth, flat: flat}
	return in.appendTo(dst, math.MaxInt)
}

// indented is raw as appendIndented writes it: raw itself when it is already
// so, as the plan and the runs of a file stepseq wrote are, so that the file
// read is not held twice, once as read and once as it is written again.
func indented(raw []byte, depth, flat int) []byte {
	n, same := indentedLen(raw, depth, flat)
	if same {
		return raw[:len(raw):len(raw)]
	}
	return appendIndented(make([]byte, 0, n), raw, depth, flat)
}

// indentedLen is the length of raw as appendIndented writes it, and whether
// that is raw itself; worked out a part at a time, without the whole of it.
func indentedLen(raw []byte, depth, flat int) (n int, same bool) {
	var scratch [2 << 10]byte
	in := indenter{raw: raw, depth: depth, flat: flat}
	buf := scratch[:0]
	same = true
	for !in.done() {
		// Half the buffer: what a part ends with (an indentation) fits beside it.
		part := in.appendTo(buf[:0], cap(buf)/2)
		same = same && n+len(part) <= len(raw) && bytes.Equal(raw[n:n+len(part)], part)
		n += len(part)
	}
	return n, same && n == len(raw)
}

// indenter indents raw (see appendIndented) in parts, where it stopped.
type indenter struct {
	raw         []byte
	depth, flat int
	i           int // where raw is read next
	level       int // containers open
	strEnd      int // past the string being copied, when i is inside one
}

func (in *indenter) done() bool { return in.i >= len(in.raw) }

// appendTo appends raw indented, from where the last call stopped, until it is
// done or dst reaches limit bytes; a long string is cut at limit.
func (in *indenter) appendTo(dst []byte, limit int) []byte {
	raw, i, level := in.raw, in.i, in.level
	// compact reports whether the innermost open container is written compact.
	compact := func() bool { return level-1 >= in.flat }
	newline := func(n int) {
		dst = append(dst, '\n')
		for range in.depth + n {
			dst = append(dst, ' ', ' ')
		}
	}
	for ; i < len(raw) && len(dst) < limit; i++ {
		if i < in.strEnd { // a string cut at the last limit
			n := min(in.strEnd-i, limit-len(dst))
			dst = append(dst, raw[i:i+n]...)
			i += n - 1
			continue
		}
		switch c := raw[i]; c {
		case ' ', '\t', '\n', '\r':
		case '"':
			// Valid JSON: the string ends. The branch above copies it.
			in.strEnd = stringEnd(raw, i)
			i--
		case '{', '[':
			if j := skipSpace(raw, i+1); j < len(raw) && (raw[j] == '}' || raw[j] == ']') {
				dst = append(dst, c, raw[j]) // empty: {} or []
				i = j
				continue
			}
			dst = append(dst, c)
			level++
			if !compact() {
				newline(level)
			}
		case '}', ']':
			if !compact() {
				newline(level - 1)
			}
			level--
			dst = append(dst, c)
		case ',':
			dst = append(dst, c)
			if !compact() {
				newline(level)
			}
		case ':':
			dst = append(dst, c)
			if !compact() {
				dst = append(dst, ' ')
			}
		default:
			dst = append(dst, c)
		}
	}
	in.i, in.level = i, level
	return dst
}
