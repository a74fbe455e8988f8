package proc

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// A try's record is written three times and every record of the pool read once
// per try: encoding/json's reflection and validation were most of what the lock
// cost the chain in CPU. appendJSON writes the JSON json.Marshal would mean, and
// parseRecord reads that form directly, handing anything else to
// json.Unmarshal, so what a record says is what json.Unmarshal reads in it.

// appendJSON appends rec as JSON, its fields in their declared order.
func (rec *TryRecord) appendJSON(b []byte) []byte {
	b = append(b, `{"step":`...)
	b = appendJSONString(b, rec.Step)
	b = append(b, `,"try":`...)
	b = strconv.AppendInt(b, int64(rec.Try), 10)
	b = append(b, `,"started":`...)
	b = appendJSONString(b, rec.Started)
	if rec.Began != 0 {
		b = strconv.AppendInt(append(b, `,"began":`...), rec.Began, 10)
	}
	if rec.PID != 0 {
		b = strconv.AppendInt(append(b, `,"pid":`...), int64(rec.PID), 10)
	}
	if rec.StartTicks != 0 {
		b = strconv.AppendUint(append(b, `,"startTicks":`...), rec.StartTicks, 10)
	}
	if rec.Pgid != 0 {
		b = strconv.AppendInt(append(b, `,"pgid":`...), int64(rec.Pgid), 10)
	}
	if rec.Sid != 0 {
		b = strconv.AppendInt(append(b, `,"sid":`...), int64(rec.Sid), 10)
	}
	if rec.Exited {
		b = append(b, `,"exited":true`...)
	}
	b = strconv.AppendInt(append(b, `,"code":`...), int64(rec.Code), 10)
	if rec.Signal != "" {
		b = appendJSONString(append(b, `,"signal":`...), rec.Signal)
	}
	if rec.TimedOut {
		b = append(b, `,"timedOut":true`...)
	}
	if rec.Stopped {
		b = append(b, `,"stopped":true`...)
	}
	return append(b, '}')
}

// appendJSONString quotes s as it stands when nothing in it needs escaping, and
// as json.Marshal does otherwise.
func appendJSONString(b []byte, s string) []byte {
	if plainJSON(s) {
		return append(append(append(b, '"'), s...), '"')
	}
	q, _ := json.Marshal(s)
	return append(b, q...)
}

// plainJSON: s is valid UTF-8 with no quote, backslash, control character or
// character json.Marshal escapes (<, >, &, U+2028, U+2029).
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
		if c >= utf8.RuneSelf {
			return utf8.ValidString(s) && !containsLineSep(s)
		}
	}
	return true
}

func containsLineSep(s string) bool {
	for _, r := range s {
		if r == '\u2028' || r == '\u2029' {
			return true
		}
	}
	return false
}

// parseRecord reads a record as json.Unmarshal does (what it fills in on an
// error too): the form appendJSON writes directly, anything else through
// json.Unmarshal.
func parseRecord(data []byte) TryRecord {
	var rec TryRecord
	if !parsePlainRecord(data, &rec) {
		rec = TryRecord{}
		_ = json.Unmarshal(data, &rec)
	}
	return rec
}

// parsePlainRecord parses an object of the record's own keys, spelled as
// declared, with no white space, whose strings escape nothing and whose numbers
// are plain integers. false: data is not of that form (rec is then partial).
func parsePlainRecord(data []byte, rec *TryRecord) bool {
	p := plainParser{data: data}
	if !p.byte('{') {
		return false
	}
	if p.byte('}') {
		return p.end()
	}
	for {
		key, ok := p.string()
		if !ok || !p.byte(':') {
			return false
		}
		if !p.field(key, rec) {
			return false
		}
		if p.byte('}') {
			return p.end()
		}
		if !p.byte(',') {
			return false
		}
	}
}

type plainParser struct {
	data []byte
	i    int
}

func (p *plainParser) end() bool { return p.i == len(p.data) }

func (p *plainParser) byte(c byte) bool {
	if p.i < len(p.data) && p.data[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *plainParser) string() (string, bool) {
	if !p.byte('"') {
		return "", false
	}
	start := p.i
	for ; p.i < len(p.data); p.i++ {
		c := p.data[p.i]
		if c == '"' {
			s := string(p.data[start:p.i])
			p.i++
			return s, plainJSON(s)
		}
		if c < 0x20 || c == '\\' {
			return "", false
		}
	}
	return "", false
}

// unsigned is a run of digits without a leading zero (JSON's form), "0" alone.
func (p *plainParser) unsigned() (string, bool) {
	start := p.i
	for p.i < len(p.data) && p.data[p.i] >= '0' && p.data[p.i] <= '9' {
		p.i++
	}
	t := string(p.data[start:p.i])
	return t, t != "" && (t[0] != '0' || t == "0")
}

func (p *plainParser) digits(bits int) (int64, bool) {
	neg := p.byte('-')
	t, ok := p.unsigned()
	if !ok {
		return 0, false
	}
	if neg {
		t = "-" + t
	}
	n, err := strconv.ParseInt(t, 10, bits)
	return n, err == nil
}

func (p *plainParser) int() (int, bool) {
	n, ok := p.digits(strconv.IntSize)
	return int(n), ok
}

func (p *plainParser) bool() (bool, bool) {
	for _, w := range []string{"true", "false"} {
		if len(p.data)-p.i >= len(w) && string(p.data[p.i:p.i+len(w)]) == w {
			p.i += len(w)
			return w == "true", true
		}
	}
	return false, false
}

func parseUint64(t string) (uint64, bool) {
	n, err := strconv.ParseUint(t, 10, 64)
	return n, err == nil
}

// field parses the value of the record's key into rec; false for a key the
// record does not have or a value not of its form.
func (p *plainParser) field(key string, rec *TryRecord) bool {
	var ok bool
	switch key {
	case "pgid":
		rec.Pgid, ok = p.int()
	case "sid":
		rec.Sid, ok = p.int()
	case "step":
		rec.Step, ok = p.string()
	case "started":
		rec.Started, ok = p.string()
	case "signal":
		rec.Signal, ok = p.string()
	case "try":
		rec.Try, ok = p.int()
	case "pid":
		rec.PID, ok = p.int()
	case "code":
		rec.Code, ok = p.int()
	case "began":
		var n int64
		n, ok = p.digits(64)
		rec.Began = n
	case "startTicks":
		var t string
		if t, ok = p.unsigned(); ok {
			rec.StartTicks, ok = parseUint64(t)
		}
	case "exited":
		rec.Exited, ok = p.bool()
	case "timedOut":
		rec.TimedOut, ok = p.bool()
	case "stopped":
		rec.Stopped, ok = p.bool()
	default:
		return false
	}
	return ok
}
