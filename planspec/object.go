package planspec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// object is a JSON object that remembers its key order and the raw bytes of every
// value, so that keys stepseq does not know survive a read and a write verbatim and
// in place.
type object struct {
	keys []string
	vals map[string]json.RawMessage
}

// parseObject splits a JSON object into its members without interpreting them.
// The values are the input's own bytes. sp are the spans of data's objects and
// lists, when known (nil: none).
func (sp spans) parseObject(data []byte) (object, error) {
	if o, ok := sp.scanObject(data); ok {
		return o, nil
	}
	return decodeObject(data)
}

// scanObject is parseObject by a plain scan, many times faster than the decoder's
// tokens on a large state. Its input is valid JSON (ParseState checks the whole
// file first), so it only finds where members begin and end; it declines (ok
// false) anything that is not an object, which decodeObject then reports.
func (sp spans) scanObject(data []byte) (o object, ok bool) {
	// The members are gathered first, on the stack for a small object, so that
	// the keys and the map are made once at their size.
	type member struct {
		key string
		val json.RawMessage
	}
	var buf [16]member
	members := buf[:0]
	l, more, ok := openList(data, '{', '}')
	for more {
		key, start, end := sp.scanMember(data, l.at)
		if end >= 0 {
			members = append(members, member{key, json.RawMessage(data[start:end:end])})
		}
		more, ok = l.next(end)
	}
	if !ok {
		return object{}, false
	}
	o.keys = make([]string, 0, len(members))
	o.vals = make(map[string]json.RawMessage, len(members))
	for _, m := range members {
		if _, dup := o.vals[m.key]; !dup {
			o.keys = append(o.keys, m.key)
		}
		o.vals[m.key] = m.val
	}
	if len(o.keys) == 0 {
		o.keys = nil
	}
	return o, true
}

// scanMember reads the object member at data[i]: its key, and where its value
// starts and ends; end is -1 when it is not a member.
func (sp spans) scanMember(data []byte, i int) (key string, start, end int) {
	if i >= len(data) || data[i] != '"' {
		return "", 0, -1
	}
	stop := stringEnd(data, i)
	if stop < 0 {
		return "", 0, -1
	}
	key = string(data[i+1 : stop-1])
	if strings.IndexByte(key, '\\') >= 0 || !utf8.ValidString(key) {
		// Escapes, or bytes that are not UTF-8: the decoder reads them (as
		// U+FFFD), so that the key is the one encoding/json would see.
		var unquoted string
		if json.Unmarshal(data[i:stop], &unquoted) != nil {
			return "", 0, -1
		}
		key = unquoted
	}
	i = skipSpace(data, stop)
	if i >= len(data) || data[i] != ':' {
		return "", 0, -1
	}
	start = skipSpace(data, i+1)
	return key, start, sp.valueEnd(data, start)
}

// list walks the members of a JSON object or the items of a list, by a plain
// scan: at is where the next one starts.
type list struct {
	data  []byte
	at    int
	close byte
}

// openList starts on the object or the list that data holds, open and close
// being its brackets. more says whether a first member follows; ok is false when
// data does not start with open.
func openList(data []byte, open, close byte) (l list, more, ok bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != open {
		return l, false, false
	}
	l = list{data: data, at: skipSpace(data, i+1), close: close}
	if l.at < len(data) && data[l.at] == close {
		return l, false, skipSpace(data, l.at+1) == len(data)
	}
	return l, true, true
}

// next moves past the member that ends at end (-1: it was not one). more says
// whether another follows; ok is false when data is not the object or list
// alone.
func (l *list) next(end int) (more, ok bool) {
	if end < 0 {
		return false, false
	}
	i := skipSpace(l.data, end)
	switch {
	case i >= len(l.data):
		return false, false
	case l.data[i] == ',':
		l.at = skipSpace(l.data, i+1)
		return true, true
	case l.data[i] == l.close:
		return false, skipSpace(l.data, i+1) == len(l.data)
	}
	return false, false
}

// sharedStringFrom is the length from which a decoded string shares the bytes
// it was decoded from (see plainString).
const sharedStringFrom = 256

// plainString reads a JSON string, valid JSON as scanObject's input is, without
// the decoder: a condition's quotes are escaped, and the decoder costs several
// times a plain copy. It declines (ok false) anything else, a \u escape or bytes
// that are not UTF-8 (the decoder replaces them), for the decoder to read.
//
// A long string with no escape is not copied: it shares raw, which is part of
// the content a state is parsed from and which the state keeps and never
// changes (ParseStateBytes), so the file is not held twice, once as read and
// once as its strings. A short one is copied, so that a name or a setting kept
// after the state is gone does not keep the whole file alive.
func plainString(raw []byte) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	body := raw[1 : len(raw)-1]
	if !utf8.Valid(body) {
		return "", false
	}
	esc := bytes.IndexByte(body, '\\')
	if esc < 0 && len(body) >= sharedStringFrom {
		return unsafe.String(&body[0], len(body)), true
	}
	if esc < 0 {
		return string(body), true
	}
	out := make([]byte, esc, len(body))
	copy(out, body)
	for i := esc; i < len(body); i++ {
		c := body[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++ // valid JSON: an escape is never last
		switch body[i] {
		case '"', '\\', '/':
			out = append(out, body[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		default: // \u
			return "", false
		}
	}
	return string(out), true
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\n' || data[i] == '\r' || data[i] == '\t') {
		i++
	}
	return i
}

// stringEnd is the index just past the string starting at data[i] (a quote); -1
// when it does not end. The closing quote is the first one not escaped, that is
// not preceded by an odd run of backslashes: found with IndexByte, which is many
// times faster than a loop over the bytes.
func stringEnd(data []byte, i int) int {
	for j := i + 1; ; {
		k := bytes.IndexByte(data[j:], '"')
		if k < 0 {
			return -1
		}
		q := j + k
		run := 0
		for p := q - 1; p > i && data[p] == '\\'; p-- {
			run++
		}
		if run%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
}

// valueEnd is the index just past the JSON value starting at data[i]; -1 when it
// is not one.
func (sp spans) valueEnd(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		end := stringEnd(data, i)
		return end
	case '{', '[':
		if n, ok := sp[&data[i]]; ok {
			return i + n
		}
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				end := stringEnd(data, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(data) && data[j] != ',' && data[j] != '}' && data[j] != ']' && data[j] != ' ' &&
		data[j] != '\n' && data[j] != '\r' && data[j] != '\t' {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// decodeObject is parseObject through the decoder's tokens: the reference, and
// the one that says what is wrong.
func decodeObject(data []byte) (object, error) {
	o := object{vals: map[string]json.RawMessage{}}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return o, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return o, fmt.Errorf("want an object, got %s", describe(data))
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return o, err
		}
		key := tok.(string) // object keys are always strings
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return o, err
		}
		if _, dup := o.vals[key]; !dup {
			o.keys = append(o.keys, key)
		}
		o.vals[key] = raw
	}
	if _, err := dec.Token(); err != nil {
		return o, err
	}
	return o, nil
}

func (o *object) has(key string) bool {
	_, ok := o.vals[key]
	return ok
}

// set stores v under key, keeping the key's place when it was already there.
func (o *object) set(key string, v any) {
	raw, err := marshal(v)
	if err != nil {
		// Only values built by this package reach here; they always marshal.
		panic(fmt.Sprintf("planspec: marshal %s: %v", key, err))
	}
	if o.vals == nil {
		o.vals = map[string]json.RawMessage{}
	}
	if _, ok := o.vals[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = raw
}

// setRaw stores an encoded value under key.
func (o *object) setRaw(key string, raw json.RawMessage) {
	if o.vals == nil {
		o.vals = map[string]json.RawMessage{}
	}
	if _, ok := o.vals[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = raw
}

func (o *object) del(key string) {
	if _, ok := o.vals[key]; !ok {
		return
	}
	delete(o.vals, key)
	for i, k := range o.keys {
		if k == key {
			o.keys = append(o.keys[:i:i], o.keys[i+1:]...)
			break
		}
	}
}

// MarshalJSON writes the members in order, compact.
func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(o.vals[k])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshal is json.Marshal without HTML escaping, as Python's json.dump writes.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// describe names the JSON type of a raw value for error messages.
func describe(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string " + Clip(string(raw), 40)
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "the number " + Clip(string(raw), 40)
	}
}

func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// appendStrings appends a JSON list of strings, as json.Marshal without HTML
// escaping would write it, without reflection: the state's lists are written after
// every step.
func appendStrings(b []byte, list []string) []byte {
	b = append(b, '[')
	for i, s := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// appendString appends s as a JSON string, as encoding/json writes it: invalid
// UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r == '\n':
			b = append(b, '\\', 'n')
		case r == '\r':
			b = append(b, '\\', 'r')
		case r == '\t':
			b = append(b, '\\', 't')
		case r < 0x20 || r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return append(b, '"')
}

// LineCol turns a byte offset into a 1-based line and column (in characters).
func LineCol(data []byte, off int) (int, int) {
	before := data[:off]
	line := bytes.Count(before, []byte{'\n'}) + 1
	start := bytes.LastIndexByte(before, '\n') + 1
	return line, utf8.RuneCount(before[start:]) + 1
}
