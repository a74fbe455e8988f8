package planspec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// object is a JSON object that remembers its key order and the raw bytes of every
// value, so that keys stepseq does not know survive a read and a write verbatim and
// in place.
type object struct {
	keys []string
	vals map[string]json.RawMessage
}

// parseObject splits a JSON object into its members without interpreting them.
// The values are the input's own bytes.
func parseObject(data []byte) (object, error) {
	if o, ok := scanObject(data); ok {
		return o, nil
	}
	return decodeObject(data)
}

// scanObject is parseObject by a plain scan, many times faster than the decoder's
// tokens on a large state. Its input is valid JSON (ParseState checks the whole
// file first), so it only finds where members begin and end; it declines (ok
// false) anything that is not an object, which decodeObject then reports.
func scanObject(data []byte) (o object, ok bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return o, false
	}
	o.vals = map[string]json.RawMessage{}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return o, skipSpace(data, i+1) == len(data)
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return o, false
		}
		end, escaped := stringEnd(data, i)
		if end < 0 {
			return o, false
		}
		key := string(data[i+1 : end-1])
		if escaped {
			if json.Unmarshal(data[i:end], &key) != nil {
				return o, false
			}
		}
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return o, false
		}
		start := skipSpace(data, i+1)
		stop := valueEnd(data, start)
		if stop < 0 {
			return o, false
		}
		if _, dup := o.vals[key]; !dup {
			o.keys = append(o.keys, key)
		}
		o.vals[key] = json.RawMessage(data[start:stop:stop])
		i = skipSpace(data, stop)
		if i >= len(data) {
			return o, false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return o, skipSpace(data, i+1) == len(data)
		default:
			return o, false
		}
	}
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\n' || data[i] == '\r' || data[i] == '\t') {
		i++
	}
	return i
}

// stringEnd is the index just past the string starting at data[i] (a quote), and
// whether it holds an escape; -1 when it does not end.
func stringEnd(data []byte, i int) (int, bool) {
	escaped := false
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j + 1, escaped
		}
	}
	return -1, false
}

// valueEnd is the index just past the JSON value starting at data[i]; -1 when it
// is not one.
func valueEnd(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		end, _ := stringEnd(data, i)
		return end
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				end, _ := stringEnd(data, j)
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
		return "a string " + clip(string(raw), 40)
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "the number " + clip(string(raw), 40)
	}
}

func clip(s string, n int) string {
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
