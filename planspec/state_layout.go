package planspec

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
	level := 0 // containers open
	// compact reports whether the innermost open container is written compact.
	compact := func() bool { return level-1 >= flat }
	newline := func(n int) {
		dst = append(dst, '\n')
		for range depth + n {
			dst = append(dst, ' ', ' ')
		}
	}
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; c {
		case ' ', '\t', '\n', '\r':
		case '"':
			end := stringEnd(raw, i) // valid JSON: it ends
			dst = append(dst, raw[i:end]...)
			i = end - 1
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
	return dst
}
